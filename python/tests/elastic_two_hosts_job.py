"""One rank of tools/two-hosts-test.sh's elastic phase: 4 ranks, 2 per "host", the second host in
a pid namespace of its own (as another machine would be), so ranks 0 and 1 cannot see a process
of that host through /proc. World rank 3 (second host) SIGKILLs itself while the others
all-reduce; rank 2, its node-mate, sees it gone and reports it through the store; ranks 0 and 1
learn it from there (docs/elastic.md, "How the dead are found"). Every survivor must get a
RankFailureError naming rank 3, shrink, and pass collectives at world size 3. Prints "survived".

    RANK=.. WORLD_SIZE=4 MASTER_ADDR=.. MASTER_PORT=.. python3 elastic_two_hosts_job.py
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

import groupcoord as gc

DIES = 3


def main() -> int:
    rank = int(os.environ["RANK"])
    gc.set_rank_failure_policy("identify")
    gc.init_distributed_environment(backend="gloo", timeout=5.0)
    gc.initialize_model_parallel(data_parallel_size=4)  # EP spans the world
    ep = gc.get_ep_group()
    # The setting under test: the dying rank's pid namespace is not the first host's.
    namespaces = np.asarray(ep.all_gather(
        np.array([os.stat("/proc/self/ns/pid").st_ino], dtype=np.int64), dim=0)).tolist()
    assert namespaces[0] == namespaces[1] != namespaces[2] == namespaces[3], namespaces
    x = np.ones(4096, np.float32)
    for _ in range(20):
        ep.all_reduce(x)
    if rank == DIES:
        time.sleep(0.2)  # the others are waiting in their next all_reduce
        os.kill(os.getpid(), signal.SIGKILL)
    started = time.monotonic()
    try:
        while True:
            ep.all_reduce(x)
    except gc.RankFailureError as error:
        dead = error.dead_ranks
        print(f"rank {rank}: {error}", flush=True)
    assert dead == [DIES], dead
    told = time.monotonic() - started
    # Well before the 5 s timeout: a rank that broke closes its connections, so the failure
    # reaches ranks that never talked to the dead one (without that, rank 1 waited 5.0 s).
    assert told < 2.5, f"rank {rank} heard of the death only after {told:.2f} s"
    result = gc.shrink_model_parallel(dead)
    assert (result.world_size, result.rank) == (3, rank), (result.world_size, result.rank)
    assert ep.world_size == 3 and ep.rank_in_group == rank
    total = np.asarray(ep.all_reduce(np.full(8, rank + 1.0, np.float32)))
    assert (total == 6.0).all(), total
    gathered = np.asarray(ep.all_gather(np.full(2, float(rank), np.float32), dim=0)).tolist()
    assert gathered == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0], gathered
    world = gc.get_world_group()
    assert world.broadcast_object({"step": 7} if rank == 0 else None, src=0) == {"step": 7}
    world.barrier()
    gc.destroy_distributed_environment()
    print(f"rank {rank}: survived (told {told:.2f} s after the all_reduce began)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
