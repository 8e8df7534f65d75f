"""Per-step metadata from Python: broadcast_object and broadcast_tensor_dict, through the
shared-memory message queue (use_message_queue_broadcaster=True, vLLM's mq_broadcaster) against
the CPU group (shared memory by default, Gloo with GROUPCOORD_CPU_SHM=0), in the same processes
and the same run, rounds alternating between the two.

    mpirun --allow-run-as-root --oversubscribe -np 2 \\
        env PYTHONPATH=build/python /usr/bin/python3 benchmarks/bench_object_broadcast.py
    mpirun ... -np 4 ... --json np4.json                 # 1 writer, 3 readers
    mpirun ... -x GROUPCOORD_CPU_SHM=0 ... --label gloo  # CPU group on Gloo (read at group creation)
    /usr/bin/python3 benchmarks/bench_object_broadcast.py --report a.json b.json   # merged markdown

    mpirun ... --sections paced1k,paced64k            # the writer pausing before each message

Sections (every rank of the world takes part; rank 0 is the source):
  object 1KiB / object 64KiB   broadcast_object(obj, src=0) of a dict whose pickle is ~1 KiB /
                               ~64 KiB (a few fields and a bytes payload)
  paced1k / paced64k           the writer sleeps each of --pauses-us before each message (as an
                               engine between steps); one-way latency: the reader's receive time
                               minus the writer's time.monotonic_ns() stamp in the object
  tensor_dict decode           broadcast_tensor_dict of a decode step's metadata: 10 int32/int64
                               numpy arrays of 256..512 elements and 6 scalars/strings (the
                               metadata goes through broadcast_object, the arrays over the CPU
                               group, on both paths)
Paths: "mq"  a GroupCoordinator(..., use_message_queue_broadcaster=True)
       "cpu" a GroupCoordinator(...) without it (broadcast_object over the CPU group)
Both coordinators span the whole world, gloo backend, no device communicator. A third one (with
a device communicator) does the barriers and gathers the figures, outside the timed calls.

Method, per section: one checked call per path (every reader compares what it received with
what was sent; `ok` needs every rank), 3 warm-up calls, a calibration (best of three batches of
20 calls) that sets the calls per round to about --target-ms of work, then --rounds rounds; each
round runs every path once, the first path alternating. A path's turn is a barrier on the world group, one untimed call, then
`calls` back-to-back calls, each timed on every rank with perf_counter_ns. A call's time is the
slowest rank's time for that call (in steady state a reader's: the writer of a message queue
returns once its message is in the ring); p50/p99 are over every call of every round. `writer
p50` is rank 0's own time. After the rounds every path is checked once more.
`other`: cores' worth of other processes' work during the section (/proc/stat busy time minus
every rank's own CPU time, over the section's wall time).
"""

from __future__ import annotations

import argparse
import gc as pygc
import json
import os
import pickle
import platform
import resource
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

# ---- report mode (no MPI) --------------------------------------------------------------------


def fmt(us: float) -> str:
    return f"{us:.1f}" if us < 100 else f"{us:.0f}"


def report(paths: list[str]) -> None:
    runs = [json.load(open(p)) for p in paths]
    print("| run | ranks | section | mq p50 | mq p99 | cpu p50 | cpu p99 | cpu/mq p50 | "
          "cpu/mq p99 | mq writer p50 | calls x rounds | ok | other |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for run in runs:
        for sec in run["sections"]:
            mq, cpu = sec["paths"]["mq"], sec["paths"]["cpu"]
            ok = all(p["ok"] for p in sec["paths"].values())
            calls = ", ".join(f"{p['calls']}x{len(p['round_p50_us'])}"
                              for p in (mq, cpu))
            print(f"| {run['label']} | {run['world_size']} | {sec['name']} | "
                  f"{fmt(mq['p50_us'])} | {fmt(mq['p99_us'])} | {fmt(cpu['p50_us'])} | "
                  f"{fmt(cpu['p99_us'])} | {cpu['p50_us'] / mq['p50_us']:.1f}x | "
                  f"{cpu['p99_us'] / mq['p99_us']:.1f}x | {fmt(mq['writer_p50_us'])} | "
                  f"{calls} | {'ok' if ok else 'FAILED'} | {sec['other_cores']:.2f} |")


# ---- payloads --------------------------------------------------------------------------------


def object_payload(target_bytes: int) -> dict:
    """A dict whose pickle is target_bytes long (give or take a few bytes)."""
    rng = np.random.default_rng(target_bytes)
    obj: dict[str, Any] = {"step": 12345, "kind": "decode", "req_ids": [f"req-{i}" for i in range(8)],
                           "blob": b""}
    overhead = len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    obj["blob"] = rng.integers(0, 256, size=max(0, target_bytes - overhead - 4),
                               dtype=np.uint8).tobytes()
    return obj


def decode_metadata(batch: int = 256) -> dict:
    """A decode step's metadata as a driver broadcasts it: ~10 small index arrays + scalars."""
    rng = np.random.default_rng(7)
    seq_lens = rng.integers(16, 4096, size=batch, dtype=np.int32)
    return {
        "input_tokens": rng.integers(0, 128_000, size=batch, dtype=np.int64),
        "input_positions": (seq_lens - 1).astype(np.int64),
        "seq_lens": seq_lens,
        "query_start_loc": np.arange(batch + 1, dtype=np.int32),
        "seq_start_loc": np.concatenate([[0], np.cumsum(seq_lens)]).astype(np.int32),
        "slot_mapping": rng.integers(0, 1 << 20, size=batch, dtype=np.int64),
        "block_tables": rng.integers(0, 1 << 14, size=(batch // 4, 8), dtype=np.int32),
        "context_lens": (seq_lens - 1).astype(np.int32),
        "selected_token_indices": np.arange(batch, dtype=np.int64),
        "num_computed_tokens": (seq_lens - 1).astype(np.int32),
        "num_prefills": 0,
        "num_decode_tokens": batch,
        "max_decode_seq_len": int(seq_lens.max()),
        "attn_backend": "FLASH_ATTN",
        "virtual_engine": 0,
        "is_prompt": False,
    }


def same_object(got: Any, sent: Any) -> bool:
    return bool(got == sent)


def same_tensor_dict(got: Any, sent: dict) -> bool:
    if not isinstance(got, dict) or list(got) != list(sent):
        return False
    for key, value in sent.items():
        if isinstance(value, np.ndarray):
            g = np.asarray(got[key])
            if g.dtype != value.dtype or g.shape != value.shape or not np.array_equal(g, value):
                return False
        elif got[key] != value:
            return False
    return True


# ---- measurement -----------------------------------------------------------------------------


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def machine_busy_seconds() -> float:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, _irq, _softirq, steal = fields[:8]
    return (user + nice + system + steal) / os.sysconf("SC_CLK_TCK")


class Bench:
    def __init__(self, gc_mod: Any, args: argparse.Namespace) -> None:
        self.gc = gc_mod
        self.args = args
        world = gc_mod.get_world_group()
        self.rank = world.rank_in_group
        self.ws = world.world_size
        ranks = [list(range(self.ws))]
        local_rank = world.local_rank
        # Barriers and the gathering of figures (vLLM's world group has no device communicator,
        # so it has no all_gather).
        self.world = gc_mod.GroupCoordinator(ranks, local_rank, "gloo", True,
                                             group_name="bench_aux")
        self.groups = {
            "mq": gc_mod.GroupCoordinator(ranks, local_rank, "gloo", False,
                                          use_message_queue_broadcaster=True,
                                          group_name="bench_mq"),
            "cpu": gc_mod.GroupCoordinator(ranks, local_rank, "gloo", False,
                                           use_message_queue_broadcaster=False,
                                           group_name="bench_cpu"),
        }
        assert (self.groups["mq"].mq_broadcaster is not None) == (self.ws > 1)
        assert self.groups["cpu"].mq_broadcaster is None

    def all_floats(self, values: list[float] | np.ndarray) -> np.ndarray:
        """Every rank's values, shape (world_size, len(values)) (same length on every rank)."""
        x = np.ascontiguousarray(values, dtype=np.float64)
        return np.asarray(self.world.all_gather(x, 0)).reshape(self.ws, -1)

    def check(self, call: Callable[[Any], Any], payload: Any,
              same: Callable[[Any, Any], bool]) -> bool:
        got = call(payload if self.rank == 0 else None)
        mine = True if self.rank == 0 else same(got, payload)
        return bool(self.all_floats([1.0 if mine else 0.0]).min() == 1.0)

    def timed(self, call: Callable[[Any], Any], payload: Any, n: int) -> np.ndarray:
        arg = payload if self.rank == 0 else None
        out = np.empty(n, dtype=np.float64)
        clock = time.perf_counter_ns
        for i in range(n):
            t0 = clock()
            call(arg)
            out[i] = clock() - t0
        return out / 1e3  # microseconds

    def section(self, name: str, calls: dict[str, Callable[[Any], Any]], payload: Any,
                same: Callable[[Any, Any], bool]) -> dict:
        args, world = self.args, self.world
        names = list(calls)
        world.barrier()
        busy0, cpu0, wall0 = machine_busy_seconds(), cpu_seconds(), time.perf_counter()
        ok_before = {p: self.check(calls[p], payload, same) for p in names}
        counts = {}
        for p in names:
            self.timed(calls[p], payload, 3)  # warm-up
            best = float("inf")
            for _ in range(3):  # best of three batches of 20 calls, slowest rank's
                world.barrier()
                best = min(best, float(self.timed(calls[p], payload, 20).mean()))
            per_call = float(self.all_floats([best]).max())  # same on every rank
            counts[p] = int(min(args.max_calls,
                                max(args.min_calls, args.target_ms * 1e3 / max(per_call, 1e-3))))
        slowest: dict[str, list[np.ndarray]] = {p: [] for p in names}
        writer: dict[str, list[np.ndarray]] = {p: [] for p in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for p in order:
                pygc.collect()
                world.barrier()
                calls[p](payload if self.rank == 0 else None)  # untimed: lines the ranks up
                t = self.timed(calls[p], payload, counts[p])
                every = self.all_floats(t)
                slowest[p].append(every.max(axis=0))
                writer[p].append(every[0])
        ok_after = {p: self.check(calls[p], payload, same) for p in names}
        world.barrier()
        wall = time.perf_counter() - wall0
        busy = machine_busy_seconds() - busy0
        own = float(self.all_floats([cpu_seconds() - cpu0]).sum())
        result: dict[str, Any] = {"name": name, "wall_s": wall,
                                  "other_cores": max(0.0, (busy - own) / wall), "paths": {}}
        for p in names:
            allc = np.concatenate(slowest[p])
            result["paths"][p] = {
                "calls": counts[p],
                "p50_us": float(np.percentile(allc, 50)),
                "p99_us": float(np.percentile(allc, 99)),
                "mean_us": float(allc.mean()),
                "min_us": float(allc.min()),
                "max_us": float(allc.max()),
                "writer_p50_us": float(np.percentile(np.concatenate(writer[p]), 50)),
                "round_p50_us": [float(np.percentile(x, 50)) for x in slowest[p]],
                "ok": ok_before[p] and ok_after[p],
            }
        if self.rank == 0:
            self.print_section(result)
        return result

    def paced(self, size: int, pauses_us: list[int], messages: int) -> dict:
        """One-way latency (the reader's receive time minus the writer's stamp, one system-wide
        clock) of broadcast_object when the writer sleeps `pause` µs before each message, per
        path; p50/p99 of the slowest reader."""
        rows = []
        blob = object_payload(size)
        for pause in pauses_us:
            row: dict[str, Any] = {"pause_us": pause}
            for p, g in self.groups.items():
                latencies = []
                self.world.barrier()
                for i in range(messages + 3):  # 3 warm-up messages
                    if self.rank == 0:
                        if pause:
                            time.sleep(pause / 1e6)
                        g.broadcast_object({"t": time.monotonic_ns(), "blob": blob}, src=0)
                    else:
                        got = g.broadcast_object(None, src=0)
                        if i >= 3:
                            latencies.append((time.monotonic_ns() - got["t"]) / 1e3)
                mine = [float(np.percentile(latencies, q)) if latencies else 0.0 for q in (50, 99)]
                p50, p99 = self.all_floats(mine).max(axis=0)
                row[p] = {"p50_us": float(p50), "p99_us": float(p99)}
            rows.append(row)
            if self.rank == 0:
                mq, cpu = row["mq"], row["cpu"]
                print(f"  {size // 1024:3d} KiB pause {pause:6d} us: mq p50 {mq['p50_us']:8.1f} "
                      f"p99 {mq['p99_us']:8.1f} | cpu p50 {cpu['p50_us']:8.1f} "
                      f"p99 {cpu['p99_us']:8.1f} | cpu/mq p50 {cpu['p50_us'] / mq['p50_us']:.1f}x",
                      flush=True)
        return {"name": f"paced {size // 1024} KiB", "rows": rows}

    def print_section(self, sec: dict) -> None:
        print(f"{sec['name']}  ({self.ws} ranks, other={sec['other_cores']:.2f} cores, "
              f"{sec['wall_s']:.1f} s)")
        for p, r in sec["paths"].items():
            print(f"  {p:<4} p50 {r['p50_us']:9.1f} us  p99 {r['p99_us']:9.1f} us  "
                  f"mean {r['mean_us']:9.1f}  writer p50 {r['writer_p50_us']:8.1f}  "
                  f"{r['calls']} calls x {len(r['round_p50_us'])} rounds  "
                  f"{'ok' if r['ok'] else 'FAILED'}")
        mq, cpu = sec["paths"]["mq"], sec["paths"]["cpu"]
        print(f"  cpu/mq: p50 {cpu['p50_us'] / mq['p50_us']:.1f}x  "
              f"p99 {cpu['p99_us'] / mq['p99_us']:.1f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default=None,
                        help="name of this run (default: shm, or gloo when GROUPCOORD_CPU_SHM=0)")
    parser.add_argument("--json", default=None, help="write every figure here (rank 0)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--target-ms", type=float, default=200.0, help="work per path per round")
    parser.add_argument("--min-calls", type=int, default=30)
    parser.add_argument("--max-calls", type=int, default=5000)
    parser.add_argument("--sections", default="object1k,object64k,tensor_dict",
                        help="also: paced1k, paced64k (the writer pauses --pauses-us before "
                             "each message; one-way latency)")
    parser.add_argument("--pauses-us", default="0,50,200,1000,2000,5000,20000")
    parser.add_argument("--messages", type=int, default=200, help="per pause and path (paced)")
    parser.add_argument("--report", nargs="+", metavar="JSON",
                        help="print the runs' figures as one markdown table, and exit")
    args = parser.parse_args()
    if args.report:
        report(args.report)
        return

    import groupcoord as gc

    shm_env = os.environ.get("GROUPCOORD_CPU_SHM")
    label = args.label or ("gloo" if shm_env == "0" else "shm")
    load_before = os.getloadavg()
    gc.init_distributed_environment(backend="gloo")
    bench = Bench(gc, args)
    if bench.rank == 0:
        print(f"bench_object_broadcast: label={label}, {bench.ws} ranks, "
              f"GROUPCOORD_CPU_SHM={shm_env!r}, groupcoord {gc.__version__} from "
              f"{os.path.dirname(gc.__file__)}, load {load_before[0]:.2f}", flush=True)

    sections = []
    for name in args.sections.split(","):
        if name in ("object1k", "object64k"):
            size = 1024 if name == "object1k" else 64 * 1024
            payload: Any = object_payload(size)
            size_real = len(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
            calls = {p: (lambda obj, g=g: g.broadcast_object(obj, src=0))
                     for p, g in bench.groups.items()}
            sec = bench.section(f"broadcast_object {size // 1024} KiB", calls, payload, same_object)
            sec["pickled_bytes"] = size_real
        elif name == "tensor_dict":
            payload = decode_metadata()
            calls = {p: (lambda d, g=g: g.broadcast_tensor_dict(d, src=0))
                     for p, g in bench.groups.items()}
            sec = bench.section("broadcast_tensor_dict decode", calls, payload, same_tensor_dict)
            sec["arrays"] = sum(isinstance(v, np.ndarray) for v in payload.values())
            sec["array_bytes"] = sum(v.nbytes for v in payload.values()
                                     if isinstance(v, np.ndarray))
        elif name in ("paced1k", "paced64k"):
            if bench.rank == 0:
                print(f"paced broadcast_object ({bench.ws} ranks), slowest reader:", flush=True)
            pauses = [int(x) for x in args.pauses_us.split(",")]
            sec = bench.paced(1024 if name == "paced1k" else 64 * 1024, pauses, args.messages)
        else:
            raise SystemExit(f"unknown section {name!r}")
        sections.append(sec)

    bench.world.barrier()
    for g in [*bench.groups.values(), bench.world]:
        g.destroy()
    gc.destroy_distributed_environment()
    if bench.rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"label": label, "world_size": bench.ws, "GROUPCOORD_CPU_SHM": shm_env,
                       "host": platform.node(), "cpus": os.cpu_count(),
                       "python": sys.version.split()[0], "groupcoord": gc.__version__,
                       "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
                       "args": {k: v for k, v in vars(args).items() if k != "report"},
                       "sections": sections}, f, indent=1)


if __name__ == "__main__":
    main()
