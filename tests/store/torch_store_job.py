"""One rank of a job whose rendezvous goes through a torch TCPStore: under torchrun (its agent
hosts the store, TORCHELASTIC_USE_AGENT_STORE=True) or tests/store/with_torch_store.py --job,
which sets the same variables. Runs collectives over all ranks twice (two worlds in turn,
each a rendezvous of its own) and, with --with-torch-distributed, torch.distributed's own
gloo group beside groupcoord's in this process, through the same store.

    torchrun --nproc-per-node 2 tests/store/torch_store_job.py [--with-torch-distributed]
"""

from __future__ import annotations

import os
import sys

import numpy as np

import groupcoord as gc


def one_world(round_: int) -> None:
    gc.init_distributed_environment(backend="gloo", timeout=60)
    n = int(os.environ["WORLD_SIZE"])
    gc.initialize_model_parallel(tensor_model_parallel_size=n, backend="gloo")
    world = gc.get_tp_group()  # all ranks; the world group itself has no device communicator
    me = world.rank_in_group
    assert world.world_size == n, (world.world_size, n)
    total = world.all_reduce(np.full(4, me + 1 + round_, dtype=np.float32))
    expected = sum(r + 1 + round_ for r in range(n))
    assert np.array_equal(total, np.full(4, expected, dtype=np.float32)), total
    gathered = world.all_gather(np.array([me], dtype=np.int64), dim=0)
    assert gathered.tolist() == list(range(n)), gathered
    message = world.broadcast_object({"round": round_, "from": me} if me == 0 else None, src=0)
    assert message == {"round": round_, "from": 0}, message
    gc.destroy_model_parallel()
    gc.destroy_distributed_environment()


def main() -> int:
    rank = int(os.environ["RANK"])
    if "--with-torch-distributed" in sys.argv:
        import torch
        import torch.distributed as dist

        # A client of the same server. Torch >= 2.4 keys its own rendezvous without the restart
        # count (its agent starts a new server per restart); with_torch_store.py runs both
        # attempts against one server, so torch's keys get the attempt here, as groupcoord's do.
        server = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                               is_master=False)
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        dist.init_process_group("gloo", store=dist.PrefixStore(f"torch/attempt_{attempt}", server),
                                rank=rank, world_size=int(os.environ["WORLD_SIZE"]))
        t = torch.ones(3) * (rank + 1)
        dist.all_reduce(t)
        n = dist.get_world_size()
        assert torch.equal(t, torch.ones(3) * sum(range(1, n + 1))), t
    one_world(0)
    one_world(1)
    if "--with-torch-distributed" in sys.argv:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    print(f"rank {rank}: groupcoord collectives through the torch store passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
