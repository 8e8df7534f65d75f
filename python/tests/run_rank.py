"""One rank of tools/run-pytest.sh: runs pytest with its output in a temporary file, then shows it
on rank 0, and on any other rank only when that rank failed. (pytest runs in this process, so
every rank stays a direct child of mpirun, which env:// rendezvous relies on.) With
GROUPCOORD_TEST_LOG_DIR set, every rank writes its whole output straight into rank-N.log there: mpirun
may kill the other ranks before a failed one has printed, and a rank past its test deadline leaves
through faulthandler's _exit, after its stacks are in that file but before anything here could
copy them.

Usage: mpirun -np N python3 run_rank.py [pytest arguments]
"""

from __future__ import annotations

import os
import sys
import tempfile


def main() -> int:
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    log_dir = os.environ.get("GROUPCOORD_TEST_LOG_DIR")
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        log = open(os.path.join(log_dir, f"rank-{rank}.log"), "w+b")
    else:
        log = tempfile.TemporaryFile()
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    # pytest captures fds 1 and 2 during each test, so a stack dump written there by a rank past its
    # deadline (conftest.py) would vanish with the capture: give it this file's own descriptor.
    os.environ["GROUPCOORD_TEST_STACKS_FD"] = str(os.dup(log.fileno()))
    try:
        import pytest

        status = int(pytest.main(sys.argv[1:]))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
    if rank == 0 or status != 0:
        if rank != 0:
            print(f"---- rank {rank}: pytest exit status {status} ----", flush=True)
        log.seek(0)
        sys.stdout.buffer.write(log.read())
        sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
