"""Host time per CUDA collective called from Python: groupcoord against cupy's raw NCCL binding and
torch.distributed, in the same processes and the same run (issue 12: "never a host sync from
Python"). The Python companion of bench_host_overhead.cc (same ops and sizes).

    NCCL_SOCKET_IFNAME=lo mpirun -np 2 \\
        bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0" "$@"' \\
        env PYTHONPATH=build/python python3 benchmarks/bench_host_overhead.py \\
        [--json PATH] [--rounds 9] [--calls 200]

(one rank: mpirun -np 1 ..., or plain python3). Ranks sharing one GPU need NCCL_HOSTID per rank
and NCCL_SOCKET_IFNAME=lo (docs/testing.md); one GPU per rank needs neither.

Each figure is host time from call to return: `--calls` back-to-back calls (the GPU runs behind),
microseconds per call, the median of `--rounds` rounds after a warm-up round; between rounds the
device is drained and the ranks meet at a barrier, untimed. The columns of one op and size are
timed one after the other within each round, so they see the same machine. Columns:
  cupy       cupy.cuda.nccl.NcclCommunicator.allReduce / allGather / reduceScatter / broadcast /
             send / recv on preallocated buffers (raw pointers), cupy's current stream
  cupy+alloc for the calls that return a new array: cupy's call above plus the torch allocation
             a torch caller of raw NCCL makes for that result (torch.empty_like(x) for
             all_reduce, x.new_empty(shape) otherwise), so that gc-torch's new results, which
             come from torch's allocator (issue 12, item 3), are also compared with raw NCCL
             plus the same allocation; n/a for the other rows
  torch      torch.distributed (NCCL backend) all_reduce (in place) / all_gather_into_tensor /
             reduce_scatter_tensor / broadcast / send / recv, preallocated outputs
  gc-torch   groupcoord with torch CUDA tensors (the fast path: results from torch's allocator)
  gc-cupy    groupcoord with cupy arrays (no bfloat16 in cupy: n/a for the bf16 sizes)
groupcoord calls the TP coordinator (`tp.all_reduce(x)`, ...) at world size >= 2; at world size 1
the coordinator bypasses (vLLM), so its device communicator is called instead (a sibling one of
the group). Ops: all_reduce, all_gather (dim 0), reduce_scatter (dim 0), all_gatherv and
reduce_scatterv with uniform sizes, broadcast, send/recv (even ranks send to the next rank, odd
ranks receive; the "send" row is rank 0's time, "recv" rank 1's), and all_reduce / all_gather /
reduce_scatter with out= (baseline: the same op). Sizes: 1 x f32, 4 KiB bf16, 1 MiB bf16, the input
of all_reduce / all_gather / broadcast / send and the output of reduce_scatter.

Rank 0 prints a table per op and size: microseconds per call for each column, and for each
groupcoord column its ratio to cupy, its difference to cupy in microseconds and its ratio to
torch.distributed. A library that is not installed (or an op it lacks) shows "n/a"; the rest
still runs. --json writes every figure (all ranks' medians included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

import groupcoord as gc

try:
    import torch
    import torch.distributed as dist
except ImportError:  # the torch columns say n/a
    torch = None
    dist = None
try:
    import cupy
except ImportError:  # the cupy columns say n/a
    cupy = None
try:  # cupy built without NCCL: only its raw column says n/a
    from cupy.cuda import nccl as cupy_nccl

    if not getattr(cupy_nccl, "available", True):
        cupy_nccl = None
except ImportError:
    cupy_nccl = None

Call = Callable[[], Any]
COLUMNS = ["cupy", "cupy+alloc", "torch", "gc-torch", "gc-cupy"]
GROUPCOORD_COLUMNS = ["gc-torch", "gc-cupy"]


@dataclass(frozen=True)
class Size:
    label: str
    dtype: str  # "float32" or "bfloat16"
    elements: int

    @property
    def nbytes(self) -> int:
        return self.elements * (4 if self.dtype == "float32" else 2)


SIZES = [Size("1 x f32", "float32", 1), Size("4 KiB bf16", "bfloat16", 2048),
         Size("1 MiB bf16", "bfloat16", 512 * 1024)]
OPS = ["all_reduce", "all_gather", "reduce_scatter", "all_gatherv", "reduce_scatterv", "broadcast",
       "send/recv", "all_reduce out=", "all_gather out=", "reduce_scatter out="]
# The op a baseline library runs for a groupcoord op it has no twin of.
BASELINE = {"all_gatherv": "all_gather", "reduce_scatterv": "reduce_scatter",
            "all_reduce out=": "all_reduce", "all_gather out=": "all_gather",
            "reduce_scatter out=": "reduce_scatter"}


@dataclass
class World:
    rank: int
    size: int
    device: int


def input_elements(op: str, size: Size, world: World) -> int:
    """reduce_scatter's size is its output: its input is world-size times larger."""
    return size.elements * world.size if "reduce_scatter" in op else size.elements


def pair_peer(world: World) -> Optional[int]:
    """send/recv partner (even ranks send to rank + 1); None where a rank has none."""
    peer = world.rank + 1 if world.rank % 2 == 0 else world.rank - 1
    return peer if peer < world.size else None


# ---- the columns: each returns one call, or None for n/a ------------------------------------

def cupy_raw_call(comm: Any, op: str, size: Size, world: World) -> Optional[Call]:
    if comm is None:
        return None
    base = BASELINE.get(op, op)
    dt = cupy_nccl.NCCL_FLOAT32 if size.dtype == "float32" else getattr(
        cupy_nccl, "NCCL_BFLOAT16", 9)  # cupy has no bfloat16: uint16 buffers, NCCL's bf16
    item = cupy.float32 if size.dtype == "float32" else cupy.uint16
    n = size.elements
    stream = cupy.cuda.get_current_stream().ptr
    x = cupy.zeros(input_elements(base, size, world), dtype=item)
    y = cupy.zeros(n * world.size if base == "all_gather" else n, dtype=item)
    xp, yp = x.data.ptr, y.data.ptr
    # `_keep=` holds the buffers as long as the call exists, at no cost per call.
    if base == "all_reduce":
        return lambda _keep=(x, y): comm.allReduce(xp, yp, n, dt, cupy_nccl.NCCL_SUM, stream)
    if base == "all_gather":
        return lambda _keep=(x, y): comm.allGather(xp, yp, n, dt, stream)
    if base == "reduce_scatter":
        return lambda _keep=(x, y): comm.reduceScatter(xp, yp, n, dt, cupy_nccl.NCCL_SUM, stream)
    if base == "broadcast":
        return lambda _keep=x: comm.broadcast(xp, xp, n, dt, 0, stream)
    peer = pair_peer(world)
    if peer is None or not hasattr(comm, "send"):
        return None
    if world.rank % 2 == 0:
        return lambda _keep=x: comm.send(xp, n, dt, peer, stream)
    return lambda _keep=x: comm.recv(xp, n, dt, peer, stream)


NEW_RESULT_OPS = {"all_reduce", "all_gather", "reduce_scatter", "all_gatherv", "reduce_scatterv"}


def cupy_alloc_call(comm: Any, op: str, size: Size, world: World) -> Optional[Call]:
    """cupy's raw call plus the torch allocation of the result (the `cupy+alloc` column)."""
    if op not in NEW_RESULT_OPS or torch is None:
        return None
    raw = cupy_raw_call(comm, op, size, world)
    if raw is None:
        return None
    base = BASELINE.get(op, op)
    dtype, dev = torch_dtype(size), torch.device("cuda", world.device)
    x = torch.zeros(input_elements(base, size, world), dtype=dtype, device=dev)
    if base == "all_reduce":
        return lambda: (torch.empty_like(x), raw())
    shape = (size.elements * world.size if base == "all_gather" else size.elements,)
    return lambda: (x.new_empty(shape), raw())


def torch_dtype(size: Size) -> Any:
    return torch.float32 if size.dtype == "float32" else torch.bfloat16


def torch_dist_call(ready: bool, op: str, size: Size, world: World) -> Optional[Call]:
    if not ready:
        return None
    base = BASELINE.get(op, op)
    n, dev, dtype = size.elements, torch.device("cuda", world.device), torch_dtype(size)
    x = torch.zeros(input_elements(base, size, world), dtype=dtype, device=dev)
    if base == "all_reduce":
        return lambda: dist.all_reduce(x)  # in place: the cheapest form torch offers
    if base == "all_gather":
        out = torch.empty(n * world.size, dtype=dtype, device=dev)
        return lambda: dist.all_gather_into_tensor(out, x)
    if base == "reduce_scatter":
        out = torch.empty(n, dtype=dtype, device=dev)
        return lambda: dist.reduce_scatter_tensor(out, x)
    if base == "broadcast":
        return lambda: dist.broadcast(x, 0)
    peer = pair_peer(world)
    if peer is None:
        return None
    if world.rank % 2 == 0:
        return lambda: dist.send(x, peer)
    return lambda: dist.recv(x, peer)


def groupcoord_call(target: Any, library: str, op: str, size: Size,
                    world: World) -> Optional[Call]:
    """`target`: the TP coordinator (world size >= 2) or a device communicator."""
    if library == "torch":
        if torch is None:
            return None
        dtype = torch_dtype(size)
        dev = torch.device("cuda", world.device)
        empty = lambda k: torch.zeros(k, dtype=dtype, device=dev)  # noqa: E731
        recv_kwargs: dict = {}
    else:
        if cupy is None or size.dtype != "float32":
            return None
        dtype = np.float32
        empty = lambda k: cupy.zeros(k, dtype=dtype)  # noqa: E731
        recv_kwargs = {"array_library": "cupy"}
    n, ws = size.elements, world.size
    x = empty(input_elements(op, size, world))
    calls: dict[str, Call] = {
        "all_reduce": lambda: target.all_reduce(x),
        "all_gather": lambda: target.all_gather(x, 0),
        "reduce_scatter": lambda: target.reduce_scatter(x, 0),
        "all_gatherv": lambda: target.all_gatherv(x, 0, [n] * ws),
        "reduce_scatterv": lambda: target.reduce_scatterv(x, 0, [n] * ws),
        "broadcast": lambda: target.broadcast(x, 0),
    }
    if op in calls:
        return calls[op]
    if op.endswith(" out="):
        out = empty(n * ws if op.startswith("all_gather") else n)
        name = op.split()[0]
        if name == "all_reduce":
            return lambda: target.all_reduce(x, out=out)
        return lambda: getattr(target, name)(x, 0, out=out)
    peer = pair_peer(world)
    if peer is None:
        return None
    if world.rank % 2 == 0:
        return lambda: target.send(x, peer)
    return lambda: target.recv((n,), dtype, peer, **recv_kwargs)


# ---- timing ----------------------------------------------------------------------------------

def synchronize() -> None:
    if torch is not None:
        torch.cuda.synchronize()
    else:
        cupy.cuda.Device().synchronize()


def time_calls(call: Call, calls: int) -> float:
    """Microseconds of host time per call over `calls` back-to-back calls."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        call()
    return (time.perf_counter_ns() - start) / calls / 1000.0


def measure(columns: dict[str, Optional[Call]], barrier: Call, rounds: int,
            calls: int) -> dict[str, Optional[float]]:
    """Median microseconds per call of each column (None: n/a), after one warm-up round. Every
    rank meets every barrier, also for columns it has no call for (a rank without a send/recv
    partner), so that the ranks stay in step."""
    samples: dict[str, list[float]] = {name: [] for name in columns}
    for round_index in range(rounds + 1):
        for name, call in columns.items():
            synchronize()
            barrier()
            if call is None:
                continue
            us = time_calls(call, calls if round_index else max(calls // 10, 3))
            if round_index:  # round 0 warms up: connections, allocator blocks, caches
                samples[name].append(us)
    synchronize()
    barrier()
    return {name: statistics.median(values) if values else None
            for name, values in samples.items()}


# ---- set-up ----------------------------------------------------------------------------------

def cupy_communicator(world_group: gc.GroupCoordinator, world: World) -> Any:
    if cupy is None:
        return None
    cupy.cuda.Device(world.device).use()
    if cupy_nccl is None:
        return None
    uid = cupy_nccl.get_unique_id() if world.rank == 0 else None
    uid = world_group.broadcast_object(uid, src=0)  # the unique id through groupcoord's store
    return cupy_nccl.NcclCommunicator(world.size, uid, world.rank)


def init_torch_distributed(world: World, port: int) -> bool:
    if torch is None:
        return False
    # After groupcoord's rendezvous (which would read them too): torch's own store, env://.
    os.environ["MASTER_ADDR"] = os.environ.get("GC_BENCH_MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=world.rank, world_size=world.size)
    return True


def groupcoord_target(world: World) -> tuple[gc.GroupCoordinator, Any]:
    """An NCCL coordinator over the world, and what the calls go to (see the module doc)."""
    group = gc.GroupCoordinator([list(range(world.size))], world.device, "nccl", True,
                                group_name="bench-host")
    if world.size > 1:
        return group, group
    return group, group.make_sibling_device_group()


def sanity_check(target: Any, world: World) -> None:
    """The groupcoord path computes the right thing before it is timed."""
    if torch is not None:
        x = torch.ones(4, device=torch.device("cuda", world.device))
        expected = torch.full((4,), float(world.size), device=x.device)
        assert torch.equal(target.all_reduce(x), expected)
    if cupy is not None:
        y = target.all_reduce(cupy.ones(4, dtype=cupy.float32))
        assert isinstance(y, cupy.ndarray) and float(y.sum()) == 4.0 * world.size


# ---- breakdown: what the Python path pays torch / cupy ---------------------------------------

def breakdown_calls(world: World) -> dict[str, Call]:
    """One call per item: the pieces of torch's and cupy's own API the groupcoord path calls per
    tensor call (framework_array.h), the allocation alternatives, and groupcoord's Python work
    without the collective (`_probe_tensor_path`: import + stream + result array). Every figure
    includes one Python lambda call ("lambda: None" is that baseline)."""
    probe = getattr(gc._groupcoord, "_probe_tensor_path", None)
    calls: dict[str, Call] = {"lambda: None": lambda: None}
    if torch is not None:
        dev = torch.device("cuda", world.device)
        x = torch.zeros(4, dtype=torch.float32, device=dev)
        y = torch.zeros(4, dtype=torch.float32, device=dev)
        shape, size, index = tuple(x.shape), x.shape, world.device
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        calls.update({
            "torch x.is_cuda": lambda: x.is_cuda,
            "torch x.is_neg()": lambda: x.is_neg(),
            "torch x.dtype": lambda: x.dtype,
            "torch x.shape": lambda: x.shape,
            "torch x.stride()": lambda: x.stride(),
            "torch x.get_device()": lambda: x.get_device(),
            "torch x.data_ptr()": lambda: x.data_ptr(),
            "torch x.device": lambda: x.device,
            "torch x.is_contiguous()": lambda: x.is_contiguous(),
            "torch _cuda_getCurrentRawStream(i)": (lambda: raw(index)) if raw else None,
            "torch x.new_empty(tuple)": lambda: x.new_empty(shape),
            "torch x.new_empty(torch.Size)": lambda: x.new_empty(size),
            "torch.empty_like(x)": lambda: torch.empty_like(x),
            "torch.empty(shape, dtype=, device=)":
                lambda: torch.empty(shape, dtype=torch.float32, device=dev),
            "gc probe torch (new result)": (lambda: probe(x)) if probe else None,
            "gc probe torch (out=)": (lambda: probe(x, y)) if probe else None,
        })
    if cupy is not None:
        with cupy.cuda.Device(world.device):
            a = cupy.zeros(4, dtype=cupy.float32)
            b = cupy.zeros(4, dtype=cupy.float32)
        ashape, adtype, index = a.shape, a.dtype, world.device
        calls.update({
            "cupy a.dtype": lambda: a.dtype,
            "cupy a.shape": lambda: a.shape,
            "cupy a.strides": lambda: a.strides,
            "cupy a.data.ptr": lambda: a.data.ptr,
            "cupy a.data.device_id": lambda: a.data.device_id,
            "cupy a.device.id": lambda: a.device.id,
            "cupy get_current_stream(i).ptr": lambda: cupy.cuda.get_current_stream(index).ptr,
            "cupy runtime.getDevice()": lambda: cupy.cuda.runtime.getDevice(),
            "cupy.ndarray(shape, dtype)": lambda: cupy.ndarray(ashape, adtype),
            "cupy.empty(shape, dtype=)": lambda: cupy.empty(ashape, dtype=adtype),
            "gc probe cupy (new result)": (lambda: probe(a)) if probe else None,
            "gc probe cupy (out=)": (lambda: probe(a, b)) if probe else None,
        })
    return calls


def measure_breakdown(world: World, rounds: int, calls: int) -> dict[str, Optional[float]]:
    """Nanoseconds per call (median of `rounds` rounds of `calls` calls, after a warm-up)."""
    out: dict[str, Optional[float]] = {}
    for name, call in breakdown_calls(world).items():
        if call is None:
            out[name] = None
            continue
        try:
            time_calls(call, max(calls // 10, 3))
            samples = [time_calls(call, calls) * 1000.0 for _ in range(rounds)]
        except Exception:  # noqa: BLE001  (an API this version lacks: n/a)
            out[name] = None
            continue
        if torch is not None or cupy is not None:
            synchronize()  # results freed, the device drained before the next item
        out[name] = statistics.median(samples)
    return out


def print_breakdown(values: dict[str, Optional[float]]) -> None:
    print("breakdown (ns per call, this process, each including one Python lambda call):",
          flush=True)
    width = max(len(name) for name in values)
    for name, value in values.items():
        print(f"  {name:<{width}}  {fmt(value, '8.0f')}")
    torch_reads = ["torch x.is_cuda", "torch x.is_neg()", "torch x.dtype", "torch x.shape", "torch x.stride()",
                   "torch x.get_device()", "torch x.data_ptr()",
                   "torch _cuda_getCurrentRawStream(i)"]
    if all(values.get(k) is not None for k in torch_reads + ["lambda: None"]):
        base = values["lambda: None"]
        reads = sum(values[k] - base for k in torch_reads)
        print(f"  torch's own reads per input (7 attributes + stream, lambda excluded): "
              f"{reads:.0f} ns", flush=True)


# ---- report ----------------------------------------------------------------------------------

def fmt(value: Optional[float], spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or not b else a / b


def diff(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None else a - b


def report_rows(all_ranks: np.ndarray, keys: list[tuple[str, str]], world: World) -> list[dict]:
    """One row per (op, size) as rank 0 saw it; send/recv becomes "send" (rank 0) and "recv"
    (rank 1)."""
    rows = []
    for index, (op, label) in enumerate(keys):
        views = [(op, 0)]
        if op == "send/recv":
            views = [("send", 0)] + ([("recv", 1)] if world.size > 1 else [])
        for name, rank in views:
            values = {c: (None if np.isnan(v) else float(v))
                      for c, v in zip(COLUMNS, all_ranks[rank, index])}
            row = {"op": name, "size": label, "rank": rank}
            row.update({f"{c}_us": values[c] for c in COLUMNS})
            for c in GROUPCOORD_COLUMNS:
                row[f"{c}_over_cupy"] = ratio(values[c], values["cupy"])
                row[f"{c}_minus_cupy_us"] = diff(values[c], values["cupy"])
                row[f"{c}_over_torch"] = ratio(values[c], values["torch"])
            row["gc-torch_minus_cupy_alloc_us"] = diff(values["gc-torch"], values["cupy+alloc"])
            row["per_rank_us"] = {c: [None if np.isnan(v) else float(v)
                                      for v in all_ranks[:, index, k]]
                                  for k, c in enumerate(COLUMNS)}
            rows.append(row)
    return rows


def print_table(rows: list[dict], world: World, args: argparse.Namespace) -> None:
    print(f"bench_host_overhead.py: {world.size} rank(s), host microseconds per call (median of "
          f"{args.rounds} rounds x {args.calls} calls); ratios and differences against cupy's raw "
          f"NCCL and torch.distributed", flush=True)
    head = (f"{'op':<20}{'size':<12}" + "".join(f"{c + '_us':>14}" for c in COLUMNS)
            + "".join(f"{c + '/cupy':>14}{c + '-cupy':>14}{c + '/torch':>15}"
                      for c in GROUPCOORD_COLUMNS) + f"{'gc-torch-(cupy+alloc)':>23}")
    print(head)
    for row in rows:
        line = f"{row['op']:<20}{row['size']:<12}"
        line += "".join(f"{fmt(row[c + '_us'], '.2f'):>14}" for c in COLUMNS)
        for c in GROUPCOORD_COLUMNS:
            line += (f"{fmt(row[c + '_over_cupy'], '.2f'):>14}"
                     f"{fmt(row[c + '_minus_cupy_us'], '+.2f'):>14}"
                     f"{fmt(row[c + '_over_torch'], '.2f'):>15}")
        line += f"{fmt(row['gc-torch_minus_cupy_alloc_us'], '+.2f'):>23}"
        print(line, flush=True)


def versions() -> dict:
    out = {"groupcoord": gc.__version__}
    probes = {"torch": lambda: torch.__version__, "torch_nccl": lambda: torch.cuda.nccl.version(),
              "cupy": lambda: cupy.__version__, "cupy_nccl": lambda: cupy_nccl.get_version()}
    for name, probe in probes.items():
        try:
            out[name] = str(probe())
        except Exception:  # noqa: BLE001  (a library that is missing or too old: not recorded)
            pass
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--torch-port", type=int, default=29547,
                        help="MASTER_PORT of torch.distributed's rendezvous (rank 0's host)")
    parser.add_argument("--json", help="write every figure here (rank 0)")
    parser.add_argument("--breakdown-calls", type=int, default=2000,
                        help="calls per round of each breakdown item (0: no breakdown)")
    parser.add_argument("--profile", metavar="COLUMN:OP",
                        help="instead of the table: loop one column's call of 4 KiB bf16 (e.g. "
                        "'gc-torch:all_reduce out=' or 'cupy:all_reduce') for --profile-seconds, "
                        "for a sampling profiler (perf record -e cpu-clock:u)")
    parser.add_argument("--profile-seconds", type=float, default=3.0)
    args = parser.parse_args()
    if torch is None and cupy is None:
        print("bench_host_overhead.py: needs torch or cupy for CUDA arrays; nothing to measure")
        return 0
    device_count = torch.cuda.device_count() if torch is not None else \
        cupy.cuda.runtime.getDeviceCount()
    if device_count == 0:
        print("bench_host_overhead.py: no CUDA device visible; nothing to measure")
        return 0

    # The world group on the CPU (gloo): it only carries the barrier, the cupy unique id and the
    # results; the ranks may share a GPU.
    gc.init_distributed_environment(backend="gloo")
    world_group = gc.get_world_group()
    world = World(world_group.rank, world_group.world_size,
                  world_group.local_rank % device_count)
    if torch is not None:
        torch.cuda.set_device(world.device)
    cupy_comm = cupy_communicator(world_group, world)
    torch_ready = init_torch_distributed(world, args.torch_port)
    group, target = groupcoord_target(world)
    sanity_check(target, world)

    if args.profile:
        profile_loop(args.profile, args.profile_seconds, cupy_comm, torch_ready, target, world)
    else:
        run_table(args, world_group, world, cupy_comm, torch_ready, target)
    synchronize()
    world_group.barrier()
    if torch_ready:
        dist.destroy_process_group()
    if target is not group:
        target.destroy()
    group.destroy()
    gc.destroy_distributed_environment()
    return 0


def profile_loop(spec: str, seconds: float, cupy_comm: Any, torch_ready: bool, target: Any,
                 world: World) -> None:
    """Loops one column's call (4 KiB bf16; cupy: its raw call) and prints µs per call."""
    column, _, op = spec.partition(":")
    size = SIZES[1]
    if column == "cupy":
        call = cupy_raw_call(cupy_comm, op, size, world)
    elif column == "cupy+alloc":
        call = cupy_alloc_call(cupy_comm, op, size, world)
    elif column == "torch":
        call = torch_dist_call(torch_ready, op, size, world)
    else:
        library = {"gc-torch": "torch", "gc-cupy": "cupy"}.get(column)
        call = groupcoord_call(target, library, op, size, world) if library else None
    if call is None:
        raise SystemExit(f"--profile {spec!r}: no such call here (columns {COLUMNS}, ops {OPS})")
    calls = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter_ns()
    while time.perf_counter() < deadline:
        for _ in range(200):
            call()
        synchronize()
        calls += 200
    elapsed = (time.perf_counter_ns() - start) / 1000.0
    print(f"[profile] {spec}: {calls} calls, {elapsed / calls:.2f} µs per call (host and GPU)")


def run_table(args: argparse.Namespace, world_group: gc.GroupCoordinator, world: World,
              cupy_comm: Any, torch_ready: bool, target: Any) -> None:
    keys = [(op, size.label) for op in OPS for size in SIZES]
    medians = np.full((len(keys), len(COLUMNS)), np.nan)
    for index, (op, label) in enumerate(keys):
        size = next(s for s in SIZES if s.label == label)
        columns = {
            "cupy": cupy_raw_call(cupy_comm, op, size, world),
            "cupy+alloc": cupy_alloc_call(cupy_comm, op, size, world),
            "torch": torch_dist_call(torch_ready, op, size, world),
            "gc-torch": groupcoord_call(target, "torch", op, size, world),
            "gc-cupy": groupcoord_call(target, "cupy", op, size, world),
        }
        result = measure(columns, world_group.barrier, args.rounds, args.calls)
        medians[index] = [np.nan if result[c] is None else result[c] for c in COLUMNS]
    # Medians of every rank on rank 0, as objects: the world group has no device communicator,
    # so it cannot all_gather arrays (vLLM's neither).
    if world.rank == 0:
        gathered = [medians] + [world_group.recv_object(src=r) for r in range(1, world.size)]
        all_ranks = np.stack(gathered)  # (ranks, keys, columns)
    else:
        world_group.send_object(medians, dst=0)
        all_ranks = None
    parts = (measure_breakdown(world, args.rounds, args.breakdown_calls)
             if args.breakdown_calls > 0 else {})

    if world.rank == 0:
        rows = report_rows(all_ranks, keys, world)
        print_table(rows, world, args)
        if parts:
            print_breakdown(parts)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"world_size": world.size, "rounds": args.rounds, "calls": args.calls,
                           "versions": versions(), "rows": rows,
                           "breakdown_ns": parts}, out, indent=1)


if __name__ == "__main__":
    sys.exit(main())
