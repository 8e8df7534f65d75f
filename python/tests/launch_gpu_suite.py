"""Launches one Python GPU suite for ctest (python/tests/CMakeLists.txt, label "cuda").

Usage: launch_gpu_suite.py NEEDS NP MPIRUN [MPIRUN_FLAG...] -- PROGRAM [ARG...]

Exits 77, which ctest reports as skipped, with the reason when this machine cannot run the suite:
no NVIDIA GPU, or a module named in NEEDS (comma-separated, e.g. "torch" or "torch,cupy")
missing. Otherwise replaces itself with `MPIRUN FLAGS -np NP PROGRAM ARGS`. Where the NP ranks
outnumber the GPUs, each rank gets its own NCCL host id and loopback sockets: NCCL lets processes
share a GPU only so (docs/testing.md).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

SKIPPED = 77


def gpu_count() -> int:
    """GPUs this process may use: nvidia-smi's list, cut to CUDA_VISIBLE_DEVICES when set."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if listed.returncode != 0:
        return 0
    count = sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        # CUDA stops at the first invalid entry ("-1" hides every device).
        listed = []
        for entry in (d.strip() for d in visible.split(",")):
            if not entry or entry.startswith("-"):
                break
            listed.append(entry)
        count = min(count, len(listed))
    return count


def main(argv: list[str]) -> int:
    if len(argv) < 5 or "--" not in argv[3:]:
        print(__doc__, file=sys.stderr)
        return 2
    needs, ranks = argv[0], int(argv[1])
    separator = argv.index("--", 3)
    mpirun, program = argv[2:separator], argv[separator + 1 :]
    gpus = gpu_count()
    if gpus == 0:
        print("launch_gpu_suite: skipped: no NVIDIA GPU (nvidia-smi lists none)", flush=True)
        return SKIPPED
    missing = [m for m in needs.split(",") if m and importlib.util.find_spec(m) is None]
    if missing:
        print(f"launch_gpu_suite: skipped: {sys.executable} cannot import {', '.join(missing)}",
              flush=True)
        return SKIPPED
    if ranks > gpus:
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
        program = ["sh", "-c", 'NCCL_HOSTID="gc-test-host-$OMPI_COMM_WORLD_RANK" exec "$0" "$@"',
                   *program]
    command = [*mpirun, "-np", str(ranks), *program]
    print("launch_gpu_suite:", " ".join(command), flush=True)
    os.execvp(command[0], command)
    return 1  # not reached: execvp raises on failure


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
