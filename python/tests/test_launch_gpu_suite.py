"""launch_gpu_suite.py, ctest's launcher of the Python GPU suites: it skips (exit 77) with the
reason where no GPU or the suite's library is present, and gives each rank its own NCCL host id
exactly when the ranks outnumber the GPUs. Runs against a fake nvidia-smi and a fake mpirun that
starts the ranks one after another, so it needs no GPU and no MPI; rank-local, at 1 rank only."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gc_testing import requires_world_size

pytestmark = requires_world_size(1)

LAUNCHER = Path(__file__).with_name("launch_gpu_suite.py")
# Prints what each rank sees of the variables the launcher sets.
PROGRAM = ["sh", "-c", 'echo "rank=$OMPI_COMM_WORLD_RANK host=${NCCL_HOSTID-none}"']
FAKE_MPIRUN = """#!/bin/sh
# FLAGS... -np N PROGRAM...: runs PROGRAM N times in turn, as ranks 0..N-1.
echo "mpirun $*"
while [ "$1" != "-np" ]; do shift; done
n=$2; shift 2
i=0
while [ $i -lt $n ]; do OMPI_COMM_WORLD_RANK=$i "$@" || exit $?; i=$((i + 1)); done
"""


def executable(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def launch(tmp_path: Path, gpus: int, needs: str = "os", ranks: int = 2,
           visible: str | None = None) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if gpus >= 0:  # -1: no nvidia-smi at all
        listing = "".join(f'echo "GPU {i}: Fake GPU (UUID: GPU-{i})"\n' for i in range(gpus))
        executable(bin_dir / "nvidia-smi", "#!/bin/sh\n" + listing)
    mpirun = executable(tmp_path / "mpirun", FAKE_MPIRUN)
    env = {k: v for k, v in os.environ.items()
           if k not in ("NCCL_HOSTID", "CUDA_VISIBLE_DEVICES")}
    # Only bin_dir: a real nvidia-smi in /usr/bin (a GPU host) must not answer for the fake.
    if not (bin_dir / "sh").exists():
        (bin_dir / "sh").symlink_to("/bin/sh")
    env["PATH"] = str(bin_dir)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return subprocess.run(
        [sys.executable, str(LAUNCHER), needs, str(ranks), mpirun, "--oversubscribe", "--",
         *PROGRAM], capture_output=True, text=True, env=env, timeout=60)


def test_no_gpu_skips_with_the_reason(tmp_path: Path) -> None:
    for gpus in (-1, 0):
        case = tmp_path / f"gpus{gpus}"
        case.mkdir()
        done = launch(case, gpus)
        assert done.returncode == 77, done
        assert "skipped: no NVIDIA GPU" in done.stdout
        assert "mpirun" not in done.stdout


def test_missing_library_skips_naming_it(tmp_path: Path) -> None:
    done = launch(tmp_path, gpus=1, needs="os,no_such_module_gc")
    assert done.returncode == 77, done
    assert "cannot import no_such_module_gc" in done.stdout


def test_ranks_sharing_a_gpu_get_their_own_host_ids(tmp_path: Path) -> None:
    done = launch(tmp_path, gpus=1, ranks=2)
    assert done.returncode == 0, done
    assert "mpirun --oversubscribe -np 2 " in done.stdout
    assert "rank=0 host=gc-test-host-0" in done.stdout
    assert "rank=1 host=gc-test-host-1" in done.stdout


def test_one_gpu_per_rank_keeps_nccl_host_detection(tmp_path: Path) -> None:
    done = launch(tmp_path, gpus=2, ranks=2)
    assert done.returncode == 0, done
    assert "rank=0 host=none" in done.stdout and "rank=1 host=none" in done.stdout


def test_cuda_visible_devices_counts(tmp_path: Path) -> None:
    done = launch(tmp_path, gpus=2, ranks=2, visible="1")
    assert done.returncode == 0, done
    assert "rank=1 host=gc-test-host-1" in done.stdout


def test_a_failing_rank_fails_the_launch(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "nvidia-smi", '#!/bin/sh\necho "GPU 0: Fake GPU (UUID: GPU-0)"\n')
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), "os", "1", executable(tmp_path / "mpirun", FAKE_MPIRUN),
         "--", "sh", "-c", "exit 3"],
        capture_output=True, text=True, env={**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"},
        timeout=60)
    assert done.returncode == 3, done


@pytest.mark.parametrize("args", [[], ["torch", "2", "mpirun"], ["torch", "2", "mpirun", "prog"]])
def test_bad_usage_is_an_error(args: list[str]) -> None:
    done = subprocess.run([sys.executable, str(LAUNCHER), *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "Usage:" in done.stderr


def test_cuda_visible_devices_minus_one_hides_every_gpu(tmp_path: Path) -> None:
    done = launch(tmp_path, gpus=2, ranks=1, visible="-1")
    assert done.returncode == 77, done
    assert "skipped: no NVIDIA GPU" in done.stdout
