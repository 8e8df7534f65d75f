"""Surviving a dead rank from Python (docs/elastic.md): a job of 3 ranks started here as plain
subprocesses (mpirun would end the whole job with the killed rank), rendezvousing as mpirun's
children do on one node. Rank 2 is SIGKILLed in the middle of an all_reduce; the survivors get a
``groupcoord.RankFailureError`` naming it, call ``shrink_model_parallel`` and pass collectives at
world size 2. Runs on the outer job's rank 0 only (it makes its own job).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import groupcoord as gc

RANK_PROGRAM = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import groupcoord as gc

    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    markers = sys.argv[1]
    gc.set_rank_failure_policy("identify")
    assert gc.get_rank_failure_policy() == "identify"
    gc.init_distributed_environment(backend="gloo", timeout=3.0)
    gc.initialize_model_parallel(data_parallel_size=3)  # EP spans the world
    ep = gc.get_ep_group()
    x = np.ones(4096, np.float32)
    ep.all_reduce(x)
    open(os.path.join(markers, f"{rank}-working"), "w").close()
    try:
        while True:
            ep.all_reduce(x)
    except gc.RankFailureError as error:
        assert isinstance(error, gc.DistributedError)
        dead = error.dead_ranks
    assert dead == [2], dead
    assert gc.find_dead_ranks() == [2]
    result = gc.shrink_model_parallel(dead)
    assert (result.world_size, result.rank, result.excluded) == (2, rank, [2]), result.world_size
    assert result.new_rank_of == [0, 1, -1], result.new_rank_of
    assert result.layout["ep"] == [[0, 1]] and result.layout["dp"] == [[0, 1]], result.layout
    assert gc.get_ep_group() is ep and ep.world_size == 2 and ep.rank_in_group == rank
    total = ep.all_reduce(np.full(8, rank + 1.0, np.float32))
    assert (np.asarray(total) == 3.0).all(), total
    gathered = ep.all_gather(np.full(2, float(rank), np.float32), dim=0)
    assert np.asarray(gathered).tolist() == [0.0, 0.0, 1.0, 1.0], gathered
    world = gc.get_world_group()
    assert world.broadcast_object({"step": 7} if rank == 0 else None, src=0) == {"step": 7}
    world.barrier()
    gc.destroy_distributed_environment()
    print("survived", flush=True)
    """
)


def launch(rank: int, world: int, workdir: str, job_id: str) -> subprocess.Popen:
    # Only what a process needs to run: no launcher variable of the outer job (mpirun's, or the
    # torchrun-style ones of tools/two-hosts-test.sh) may reach the inner one.
    keep = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "HOME", "TMPDIR", "LANG", "LC_ALL")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        OMPI_COMM_WORLD_RANK=str(rank),
        OMPI_COMM_WORLD_SIZE=str(world),
        OMPI_COMM_WORLD_LOCAL_RANK=str(rank),
        OMPI_COMM_WORLD_LOCAL_SIZE=str(world),
        PMIX_NAMESPACE=job_id,
        GROUPCOORD_RENDEZVOUS_DIR=os.path.join(workdir, "rendezvous"),
    )
    return subprocess.Popen(
        [sys.executable, "-c", RANK_PROGRAM, workdir],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_survivors_shrink_after_a_kill_and_keep_serving() -> None:
    if gc.get_world_group().rank != 0:
        pytest.skip("the outer job's rank 0 runs the job")
    with tempfile.TemporaryDirectory() as workdir:
        job_id = f"elastic-py-{os.getpid()}"
        ranks = [launch(r, 3, workdir, job_id) for r in range(3)]
        try:
            deadline = time.monotonic() + 60
            while not all(os.path.exists(os.path.join(workdir, f"{r}-working")) for r in range(3)):
                assert time.monotonic() < deadline, "the ranks did not start working"
                for r, p in enumerate(ranks):
                    assert p.poll() is None, f"rank {r} exited early:\n{p.communicate()[0]}"
                time.sleep(0.01)
            killed = time.monotonic()
            ranks[2].send_signal(signal.SIGKILL)
            for r in (0, 1):
                out, _ = ranks[r].communicate(timeout=3 + 10 + 5)
                assert ranks[r].returncode == 0 and "survived" in out, f"rank {r}:\n{out}"
            print(f"survivors done {time.monotonic() - killed:.2f} s after the kill")
        finally:
            for p in ranks:
                if p.poll() is None:
                    p.kill()
                p.wait()
