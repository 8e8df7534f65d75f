"""torch and cupy interoperability checks for a GPU host (ctest's
python_torch_checks_np2, label "cuda": mpirun -np 2; both ranks may share one GPU, each with its
own NCCL_HOSTID).

CPU torch tensors go through a Gloo coordinator; CUDA torch and cupy arrays through the TP group
(NCCL). References are values each rank computes for every rank. Prints one line per check and
"TORCH CHECKS PASSED" on rank 0 at the end; any failure raises.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import torch

import groupcoord as gc


def f(rank: int, n: int, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """Rank r's input: 3 r + i % 5."""
    return (rank * 3 + torch.arange(n) % 5).to(dtype=dtype, device=device)


def check(name: str, ok: bool) -> None:
    if not ok:
        raise AssertionError(f"rank {RANK}: {name} FAILED")
    if RANK == 0:
        print(f"ok  {name}", flush=True)


def cpu_torch(g: gc.GroupCoordinator) -> None:
    ws, me = g.world_size, g.rank_in_group
    out = g.all_reduce(f(me, 6))
    check("cpu torch all_reduce -> torch", isinstance(out, torch.Tensor))
    check("cpu torch all_reduce value", torch.equal(out, sum(f(r, 6) for r in range(ws))))
    bf = g.all_gather(f(me, 4, torch.bfloat16).reshape(2, 2), dim=0)
    check("cpu torch bfloat16 all_gather", bf.dtype == torch.bfloat16 and torch.equal(
        bf, torch.cat([f(r, 4, torch.bfloat16).reshape(2, 2) for r in range(ws)], 0)))
    x = f(me, 5)
    check("cpu torch broadcast in place", g.broadcast(x, src=1) is x and torch.equal(x, f(1, 5)))
    t = f(me, 8).reshape(2, 4).t()  # non-contiguous
    check("cpu torch strided input", torch.equal(g.all_reduce(t), sum(
        f(r, 8).reshape(2, 4).t() for r in range(ws))))
    if me == 0:
        g.send(f(0, 3, torch.float16), dst=1)
    else:
        r = g.recv((3,), torch.float16, src=0)
        check("cpu torch recv with torch dtype", isinstance(r, torch.Tensor)
              and torch.equal(r, f(0, 3, torch.float16)))
    d = g.broadcast_tensor_dict({"a": f(0, 3), "b": "s"} if me == 0 else None, src=0)
    check("cpu torch tensor dict (numpy on receivers)", np.array_equal(np.asarray(d["a"]),
                                                                       f(0, 3).numpy()))


def cuda_torch(tp: gc.GroupCoordinator) -> None:
    ws, me = tp.world_size, tp.rank_in_group
    dev = torch.device("cuda", 0)
    out = tp.all_reduce(f(me, 1024, device=dev))
    check("cuda torch all_reduce -> torch cuda", isinstance(out, torch.Tensor) and out.is_cuda)
    check("cuda torch all_reduce value", torch.equal(out, sum(f(r, 1024, device=dev)
                                                              for r in range(ws))))
    g = tp.all_gather(f(me, 6, torch.bfloat16, dev).reshape(2, 3), dim=-1)
    check("cuda torch bf16 all_gather", torch.equal(g, torch.cat(
        [f(r, 6, torch.bfloat16, dev).reshape(2, 3) for r in range(ws)], -1)))
    rs = tp.reduce_scatter(f(me, 4 * ws, device=dev), dim=0)
    total = sum(f(r, 4 * ws, device=dev) for r in range(ws))
    check("cuda torch reduce_scatter", torch.equal(rs, total.chunk(ws)[me]))
    x = f(me, 7, device=dev)
    check("cuda torch broadcast in place", tp.broadcast(x, src=0) is x
          and torch.equal(x, f(0, 7, device=dev)))
    stream = torch.cuda.Stream(device=dev)
    with torch.cuda.stream(stream):
        y = f(me, 32, device=dev) * 2
        z = tp.all_reduce(y)  # on torch's current stream (the side stream)
    stream.synchronize()
    check("cuda torch on a side stream", torch.equal(z, 2 * sum(f(r, 32, device=dev)
                                                                for r in range(ws))))
    w = tp.all_reduce(f(me, 16, device=dev), stream=stream)
    stream.synchronize()
    check("cuda torch explicit stream=", torch.equal(w, sum(f(r, 16, device=dev)
                                                            for r in range(ws))))
    if me == 0:
        tp.send(f(0, 9, device=dev), dst=1)
    else:
        r = tp.recv((9,), torch.float32, src=0)
        check("cuda torch recv", r.is_cuda and torch.equal(r, f(0, 9, device=dev)))
    d = tp.broadcast_tensor_dict({"h": f(0, 5, device=dev), "n": 3} if me == 0 else None)
    check("cuda torch tensor dict", isinstance(d["h"], torch.Tensor) and d["h"].is_cuda
          and torch.equal(d["h"], f(0, 5, device=dev)) and d["n"] == 3)
    with tp.graph_capture() as ctx:
        check("graph_capture gives a torch stream", isinstance(ctx.stream, torch.cuda.Stream))
        check("graph_capture stream is current", torch.cuda.current_stream(dev) == ctx.stream)


def cuda_results(tp: gc.GroupCoordinator) -> None:
    """The torch fast path: results come from torch's caching allocator (memory_allocated grows
    by at least the result while it is held), out= is returned itself, and a call returns while
    the GPU is still busy (no host synchronisation)."""
    ws, me = tp.world_size, tp.rank_in_group
    dev = torch.device("cuda", 0)
    n = (8 << 20) // 4  # 8 MiB of float32
    x = f(me, n, device=dev)
    expected = sum(f(r, n, device=dev) for r in range(ws))
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(dev)
    y = tp.all_reduce(x)
    grown = torch.cuda.memory_allocated(dev) - before
    check("cuda torch all_reduce result from torch's allocator",
          grown >= y.numel() * y.element_size() and torch.equal(y, expected))
    part = f(me, n // ws, device=dev)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(dev)
    g = tp.all_gather(part, dim=0)
    grown = torch.cuda.memory_allocated(dev) - before
    check("cuda torch all_gather result from torch's allocator",
          grown >= g.numel() * g.element_size()
          and torch.equal(g, torch.cat([f(r, n // ws, device=dev) for r in range(ws)])))
    out = torch.empty_like(x)
    check("cuda torch all_reduce out= returns out",
          tp.all_reduce(x, out=out) is out and torch.equal(out, expected))
    torch.cuda.synchronize()
    torch.cuda._sleep(500_000_000)  # about 0.25 s of GPU time ahead of the call
    tp.all_reduce(x)
    busy = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    check("cuda torch all_reduce returns before the GPU is done (no host sync)", busy)


def cupy_arrays(tp: gc.GroupCoordinator) -> None:
    try:
        import cupy
    except ImportError:
        return
    me, ws = tp.rank_in_group, tp.world_size
    with cupy.cuda.Device(0):
        x = cupy.arange(8, dtype=cupy.float32) + me
        out = tp.all_reduce(x)
        check("cupy all_reduce -> cupy", isinstance(out, cupy.ndarray))
        check("cupy all_reduce value", bool(cupy.all(out == sum(
            cupy.arange(8, dtype=cupy.float32) + r for r in range(ws)))))
        pool = cupy.get_default_memory_pool()
        big = cupy.ones((8 << 20) // 4, dtype=cupy.float32)
        cupy.cuda.Device().synchronize()
        before = pool.used_bytes()
        y = tp.all_reduce(big)
        check("cupy all_reduce result from cupy's pool", pool.used_bytes() - before >= y.nbytes
              and bool(cupy.all(y == ws)))


RANK = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))


def main() -> int:
    gc.init_distributed_environment(local_rank=0, timeout=120)  # every rank on GPU 0
    world = gc.get_world_group()
    gloo = gc.GroupCoordinator([list(range(world.world_size))], 0, "gloo", True,
                               group_name="gloo")
    cpu_torch(gloo)
    gc.initialize_model_parallel(world.world_size, backend="nccl")
    tp = gc.get_tp_group()
    check("tp group is on CUDA", tp.device.startswith("cuda") and tp.backend == "nccl")
    cuda_torch(tp)
    cuda_results(tp)
    cupy_arrays(tp)
    torch.cuda.synchronize()
    world.barrier()
    gloo.destroy()
    gc.destroy_distributed_environment()
    if RANK == 0:
        print("TORCH CHECKS PASSED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
