"""One rank of tools/run-pytest.sh: runs pytest with its output in a temporary file, then shows it
on rank 0, and on any other rank only when that rank failed. (pytest runs in this process, so
every rank stays a direct child of mpirun, which env:// rendezvous relies on.) With
GROUPCOORD_TEST_LOG_DIR set, every rank also leaves its whole output there as rank-N.log: mpirun
may kill the other ranks before a failed one has printed.

Usage: mpirun -np N python3 run_rank.py [pytest arguments]
"""

from __future__ import annotations

import os
import sys
import tempfile


def main() -> int:
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    log = tempfile.TemporaryFile()
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    try:
        import pytest

        status = int(pytest.main(sys.argv[1:]))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
    log_dir = os.environ.get("GROUPCOORD_TEST_LOG_DIR")
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        log.seek(0)
        with open(os.path.join(log_dir, f"rank-{rank}.log"), "wb") as copy:
            copy.write(log.read())
    if rank == 0 or status != 0:
        if rank != 0:
            print(f"---- rank {rank}: pytest exit status {status} ----", flush=True)
        log.seek(0)
        sys.stdout.buffer.write(log.read())
        sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
