"""Overhead of the Python binding: per-call time of all_reduce on a 1-element float32 array
through Python, against the same call made from C++ in the same processes and the same run.

    mpirun -np 2 env PYTHONPATH=build/python /usr/bin/python3 benchmarks/bench_python_overhead.py

Each round times, in this order on every rank:
  C++            groupcoord._groupcoord._bench_all_reduce(tp, n): a C++ loop of n calls
  Python         tp.all_reduce(x) n times from Python (numpy in, numpy out), default settings
                 (host collectives run on the calling thread, GIL released)
  Python interr. the same with set_interruptible(True, collectives=True): each call runs on a
                 helper thread so that Ctrl-C interrupts it (the mode of recv and other waits)
  Python out=    tp.all_reduce(x, out=y) (numpy)
  torch / torch out=  the same two calls on 1-element torch CPU tensors (when torch imports):
                 the binding's attribute fast path for torch, results from torch.empty_like
Rank 0 prints, for each, the median and the minimum over the rounds (on a busy machine the
minimum is the steadier estimate of the fixed overhead) and the ratios to C++.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import groupcoord as gc


try:
    import torch
except ImportError:  # the torch rows are left out
    torch = None


def python_loop(group: gc.GroupCoordinator, x, n: int, out=None) -> float:
    start = time.perf_counter()
    if out is None:
        for _ in range(n):
            group.all_reduce(x)
    else:
        for _ in range(n):
            group.all_reduce(x, out=out)
    return (time.perf_counter() - start) / n


def one_round(group: gc.GroupCoordinator, x: np.ndarray, n: int) -> dict:
    results = {"C++": gc._groupcoord._bench_all_reduce(group, n) / n}
    results["Python"] = python_loop(group, x, n)
    results["Python out="] = python_loop(group, x, n, np.empty_like(x))
    gc.set_interruptible(True, collectives=True)
    results["Python interr."] = python_loop(group, x, n)
    gc.set_interruptible(True, collectives=False)
    if torch is not None:
        t = torch.ones(1)
        results["torch"] = python_loop(group, t, n)
        results["torch out="] = python_loop(group, t, n, torch.empty_like(t))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    gc.init_distributed_environment(backend="gloo")  # host memory, also on GPU hosts
    world = gc.get_world_group()
    gc.initialize_model_parallel(world.world_size, backend="gloo")
    tp = gc.get_tp_group()
    x = np.ones(1, dtype=np.float32)
    one_round(tp, x, args.iterations // 10 + 1)  # warm-up

    rounds = [one_round(tp, x, args.iterations) for _ in range(args.rounds)]
    if tp.rank_in_group == 0:
        print(f"all_reduce(1 x float32), {tp.world_size} ranks, {args.iterations} calls x "
              f"{args.rounds} rounds, microseconds per call")
        for label, pick in (("median", statistics.median), ("min", min)):
            stats = {k: pick(r[k] for r in rounds) for k in rounds[0]}
            for name, seconds in stats.items():
                ratio = seconds / stats["C++"]
                extra = (seconds - stats["C++"]) * 1e6
                print(f"  {label:<6} {name:<14} {seconds * 1e6:9.2f} us   x{ratio:.2f} of C++"
                      f"   ({extra:+.2f} us)")
    world.barrier()
    gc.destroy_distributed_environment()


if __name__ == "__main__":
    main()
