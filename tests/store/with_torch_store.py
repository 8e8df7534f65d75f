"""Runs a program against a real torch TCPStore server (ctest's torch_store_semantics and
torch_store_rendezvous, tests/store/CMakeLists.txt).

Usage: with_torch_store.py [--job N | --clash] -- COMMAND...

Hosts torch.distributed.TCPStore (loopback, a free port) in this process and runs COMMAND with
GC_TEST_TORCH_STORE=127.0.0.1:PORT and GC_TEST_TORCH_STORE_PROTOCOL (torch1 for torch < 2.1,
torch2 from 2.2). Around it, torch's own client writes "interop/from_torch" before and reads back
"interop/from_groupcoord" after, which COMMAND (test_store's TorchStoreInterop) must have written:
both sides see one key space.

With --job N, COMMAND runs as the N ranks of a job that torchrun launched with its agent hosting
the store (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
TORCHELASTIC_USE_AGENT_STORE=True, TORCHELASTIC_RUN_ID), twice against the same server, as
attempts 0 and 1 of one run (TORCHELASTIC_RESTART_COUNT): the second must not see the first's
keys. Afterwards each attempt's rendezvous keys must be in the server, under groupcoord's prefix.

With --clash, COMMAND runs once as rank 0 of a world of one given the server's address as
MASTER_ADDR / MASTER_PORT but nothing that says it is torch's (as when torch.distributed created
the store under another launcher): it must fail within 30 s, saying how to join the torch store.

Exits 77 (ctest: skipped) with the reason where torch cannot be imported or is 2.1 (whose
protocol groupcoord does not speak).
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time

SKIPPED = 77
FROM_TORCH = b"written by torch"
FROM_GROUPCOORD = b"written by groupcoord"


def main(argv: list[str]) -> int:
    job, clash = 0, False
    if argv[:1] == ["--job"]:
        job, argv = int(argv[1]), argv[2:]
    elif argv[:1] == ["--clash"]:
        clash, argv = True, argv[1:]
    if argv[:1] != ["--"] or len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    command = argv[1:]
    try:
        import torch
        import torch.distributed as dist
    except ImportError as error:
        print(f"with_torch_store: skipped: {sys.executable} cannot import torch ({error})")
        return SKIPPED
    version = tuple(int(p) for p in torch.__version__.split(".")[:2])
    if version == (2, 1):
        print(f"with_torch_store: skipped: torch {torch.__version__}'s store protocol (2.1) is not "
              "supported")
        return SKIPPED
    protocol = "torch1" if version < (2, 1) else "torch2"
    timeout = datetime.timedelta(seconds=60)
    server = dist.TCPStore("127.0.0.1", 0, None, True, timeout, wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", server.port, None, False, timeout)
    client.set("interop/from_torch", FROM_TORCH)
    env = dict(os.environ, GC_TEST_TORCH_STORE=f"127.0.0.1:{server.port}",
               GC_TEST_TORCH_STORE_PROTOCOL=protocol)
    print(f"with_torch_store: torch {torch.__version__} TCPStore at 127.0.0.1:{server.port} "
          f"({protocol})", flush=True)
    if clash:
        return run_clash(command, env, server.port)
    if job == 0:
        status = subprocess.call(command, env=env)
    else:
        status = run_job(command, env, job, server.port, client)
    if status == 0 and job == 0:
        value = fresh_client(server.port).get("interop/from_groupcoord")
        if value != FROM_GROUPCOORD:
            print(f"with_torch_store: torch read {value!r} for interop/from_groupcoord")
            status = 1
    return status


def fresh_client(port: int):
    """A torch client of its own: torch 1.13's get() of a missing key times out and leaves its
    connection out of step, and its Python binding has no check()."""
    import torch.distributed as dist

    return dist.TCPStore("127.0.0.1", port, None, False, datetime.timedelta(seconds=5))


def run_clash(command: list[str], env: dict, port: int) -> int:
    env = dict(env, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    output = done.stdout + done.stderr
    print(output)
    if done.returncode == 0 or "GROUPCOORD_TORCH_STORE=1" not in output or took > 30:
        print(f"with_torch_store: --clash: exit status {done.returncode} after {took:.1f} s; "
              "expected a failure naming GROUPCOORD_TORCH_STORE=1 within 30 s")
        return 1
    print(f"with_torch_store: --clash: failed as expected after {took:.1f} s")
    return 0


def run_job(command: list[str], env: dict, ranks: int, port: int, client) -> int:
    for attempt in (0, 1):
        ranks_env = [dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(ranks),
                          LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True",
                          TORCHELASTIC_RUN_ID="gcjob", TORCHELASTIC_RESTART_COUNT=str(attempt))
                     for r in range(ranks)]
        procs = [subprocess.Popen(command, env=e) for e in ranks_env]
        try:
            statuses = [p.wait(timeout=300) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        if any(statuses):
            print(f"with_torch_store: attempt {attempt}: exit statuses {statuses}")
            return 1
        # Each rank made two worlds in turn: both rendezvous, each under a prefix of its own.
        joined = [f"groupcoord/gcjob/attempt_{attempt}/world_{w}/groupcoord/rendezvous/joined/{r}"
                  for w in (0, 1) for r in range(ranks)]
        seen = [fresh_client(port).get(key) for key in joined]  # raises when one is missing
        if seen != [b"1"] * len(joined):
            print(f"with_torch_store: attempt {attempt}: torch's client reads {seen} for {joined}")
            return 1
        print(f"with_torch_store: attempt {attempt}: {ranks} ranks passed; torch sees their "
              "rendezvous keys", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
