"""all_gather, reduce_scatter and all_reduce of bf16 CUDA tensors, three ways in one process:
groupcoord on its regular NCCL path, groupcoord on its NCCL symmetric-memory path, and
torch.distributed over NCCL (the baseline vLLM's coordinator stands on).

    NCCL_NVLS_ENABLE=0 mpirun -np 2 env PYTHONPATH=build/python python3 \\
        benchmarks/bench_collectives_torch.py [--max-bytes N] [--iterations N] [--csv FILE]

One GPU per rank where there are enough (rank r on GPU r % count); ranks sharing a GPU need
NCCL_HOSTID per rank (docs/testing.md), and then NCCL never picks its symmetric kernels. Sizes go
from --min-bytes to --max-bytes in steps of 4x; "bytes" is the all_reduce tensor, the all_gather
output and the reduce_scatter input (nccl-tests' convention). Every path runs the same calls on
the same tensors, timed with CUDA events on torch's current stream after a warm-up.

Rank 0 prints, per (op, size): microseconds per call on each path, the ratios symmetric/regular
and groupcoord/torch (below 1: groupcoord is faster), and how many calls really took the
symmetric path (its counter, so a silent fallback shows); then, per op, the crossover: the
smallest size from which the symmetric path beat the regular one at every larger size. --csv
writes the same rows (with NCCL_SYM_CTAS, for sweeps) for collectives_report.py.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

import groupcoord as gc
from collectives_report import crossover  # this folder (the script's own) is on sys.path


@dataclass
class Op:
    name: str
    # Elements of each rank's input for a size in bytes of bf16 on `world` ranks.
    elements: Callable[[int, int], int]
    groupcoord: Callable[[gc.GroupCoordinator, torch.Tensor], torch.Tensor]
    torch: Callable[[torch.Tensor, int], Callable[[], None]]  # (input, world) -> one call


def _torch_all_gather(x: torch.Tensor, world: int) -> Callable[[], None]:
    out = torch.empty(x.numel() * world, dtype=x.dtype, device=x.device)
    return lambda: dist.all_gather_into_tensor(out, x)


def _torch_reduce_scatter(x: torch.Tensor, world: int) -> Callable[[], None]:
    out = torch.empty(x.numel() // world, dtype=x.dtype, device=x.device)
    return lambda: dist.reduce_scatter_tensor(out, x)


def _torch_all_reduce(x: torch.Tensor, world: int) -> Callable[[], None]:
    del world
    return lambda: dist.all_reduce(x)  # in place: the cheapest form torch offers


OPS = [
    Op("all_gather", lambda b, w: b // 2 // w, lambda g, x: g.all_gather(x, 0), _torch_all_gather),
    Op("reduce_scatter", lambda b, w: b // 2, lambda g, x: g.reduce_scatter(x, 0),
       _torch_reduce_scatter),
    Op("all_reduce", lambda b, w: b // 2, lambda g, x: g.all_reduce(x), _torch_all_reduce),
]


def time_calls(call: Callable[[], object], iterations: int) -> float:
    """Microseconds per call of `iterations` back-to-back calls on torch's current stream."""
    for _ in range(3):  # warm-up: connections, allocator, scratch growth
        call()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        call()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1000.0 / iterations


def make_groups(world: int, device_index: int, max_bytes: int):
    ranks = [list(range(world))]
    os.environ.pop("GROUPCOORD_USE_NCCL_SYMM_MEM", None)
    regular = gc.GroupCoordinator(ranks, device_index, "nccl", True, group_name="bench-regular")
    os.environ["GROUPCOORD_USE_NCCL_SYMM_MEM"] = "1"
    os.environ["GROUPCOORD_SYMM_ALL_REDUCE"] = "always"
    # Room for the largest reduce_scatter (input and output) without falling back.
    os.environ["GROUPCOORD_SYMM_SCRATCH_MAX_BYTES"] = str(max(3 * max_bytes, 64 << 20))
    symmetric = gc.GroupCoordinator(ranks, device_index, "nccl", True,
                                    group_name="bench-symmetric")
    return regular, symmetric


def init_torch_distributed(rank: int, world: int, port: int) -> None:
    address = os.environ.get("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("nccl", init_method=f"tcp://{address}:{port}", rank=rank,
                            world_size=world)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", type=int, default=1024)
    parser.add_argument("--max-bytes", type=int, default=1 << 30)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--torch-port", type=int, default=29533,
                        help="TCP port of torch.distributed's rendezvous (rank 0's host)")
    parser.add_argument("--csv", help="write the rows here too (rank 0)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_collectives_torch: no CUDA device visible; nothing to measure")
        return 0

    # The world group stays on the CPU (gloo): its ranks may share a GPU, and only the two
    # coordinators below need NCCL, each on this rank's GPU.
    gc.init_distributed_environment(backend="gloo")
    world_group = gc.get_world_group()
    rank, world = world_group.rank, world_group.world_size
    device_index = world_group.local_rank % torch.cuda.device_count()
    torch.cuda.set_device(device_index)
    init_torch_distributed(rank, world, args.torch_port)
    regular, symmetric = make_groups(world, device_index, args.max_bytes)
    state = symmetric.symmetric_memory_stats
    sym_ctas = os.environ.get("NCCL_SYM_CTAS", "")
    if rank == 0:
        path = (f"on, {state.window_kind} windows" if state.enabled
                else f"OFF: {state.disabled_reason}")
        print(f"bench_collectives_torch: {world} ranks on {torch.cuda.device_count()} GPU(s), "
              f"bf16, {args.iterations} calls per size, NCCL_SYM_CTAS={sym_ctas or 'unset'}; "
              f"symmetric path {path}")
        print(f"{'op':<15}{'bytes':>12}{'regular_us':>12}{'symm_us':>11}{'torch_us':>11}"
              f"{'symm/reg':>10}{'reg/torch':>10}{'symm/torch':>11}{'symm_calls':>11}")
    rows: list[dict] = []
    for op in OPS:
        size = args.min_bytes
        while size <= args.max_bytes:
            count = op.elements(size, world)
            if count > 0 and (op.name == "all_gather" or count % world == 0):
                x = torch.ones(count, dtype=torch.bfloat16, device="cuda")
                regular.barrier()
                regular_us = time_calls(lambda: op.groupcoord(regular, x), args.iterations)
                before = symmetric.symmetric_memory_stats.symmetric_calls
                symmetric_us = time_calls(lambda: op.groupcoord(symmetric, x), args.iterations)
                taken = symmetric.symmetric_memory_stats.symmetric_calls - before
                torch_us = time_calls(op.torch(x, world), args.iterations)
                row = {"op": op.name, "bytes": size, "world_size": world,
                       "sym_ctas": sym_ctas, "regular_us": regular_us,
                       "symmetric_us": symmetric_us, "torch_us": torch_us,
                       "symmetric_calls": taken, "calls": args.iterations + 3}
                rows.append(row)
                if rank == 0:
                    print(f"{op.name:<15}{size:>12}{regular_us:>12.2f}{symmetric_us:>11.2f}"
                          f"{torch_us:>11.2f}{symmetric_us / regular_us:>10.3f}"
                          f"{regular_us / torch_us:>10.3f}{symmetric_us / torch_us:>11.3f}"
                          f"{taken:>7}/{args.iterations + 3}", flush=True)
            size *= 4
    if rank == 0:
        for op in OPS:
            mine = [r for r in rows if r["op"] == op.name]
            if mine:
                print(f"crossover {op.name}: symmetric vs regular: {crossover(mine)}")
        if args.csv:
            with open(args.csv, "w", newline="") as out:
                writer = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
                writer.writeheader()
                writer.writerows(rows)
    regular.barrier()
    dist.destroy_process_group()
    symmetric.destroy()
    regular.destroy()
    gc.destroy_distributed_environment()
    return 0


if __name__ == "__main__":
    sys.exit(main())
