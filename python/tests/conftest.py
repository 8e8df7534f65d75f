"""Shared fixtures of the Python suite. Every rank of ``mpirun -np N`` runs the same tests in the
same order (tools/run-pytest.sh); collectives inside a test pair up across ranks.

* The distributed environment is initialised once per session (env://, short timeouts so that a
  desynchronised run fails in seconds instead of hanging), with TP over the whole world, on the
  backend of the array flavour (gc_testing.py: ``GROUPCOORD_TEST_ARRAYS``, gloo for numpy).
* Each test has a deadline (twice the group timeout): a rank stuck past it dumps its Python
  stacks and exits, which makes mpirun end the others (nothing hangs).
* After each test the ranks agree on its outcome: a test that failed on any rank fails on every
  rank (with the failing ranks named), so that ``-x`` stops all ranks at the same test and no
  rank is left waiting in a collective the others skipped.
"""

from __future__ import annotations

import faulthandler
import os
from typing import Iterator

import numpy as np
import pytest

import groupcoord as gc

from gc_testing import BACKEND, GROUP_TIMEOUT, configure_flavour, initialize_whole_world_tp


@pytest.fixture(scope="session", autouse=True)
def distributed() -> Iterator[None]:
    # The flavour's backend, explicitly: the numpy suite stays on gloo also on hosts with GPUs
    # (where "" would pick nccl).
    gc.init_distributed_environment(timeout=GROUP_TIMEOUT, backend=BACKEND)
    initialize_whole_world_tp()
    configure_flavour(gc.get_tp_group())
    yield
    gc.get_world_group().barrier()  # the last collective every rank takes part in
    gc.destroy_distributed_environment()


@pytest.fixture(scope="session")
def outcome_group(distributed: None) -> Iterator[gc.GroupCoordinator]:
    """A world-wide group with a device communicator, used only to agree on test outcomes
    (gloo in every flavour: it must work whatever the flavour's backend does)."""
    world = gc.get_world_group()
    group = gc.GroupCoordinator(
        [list(range(world.world_size))], world.local_rank, "gloo", True, group_name="pytest"
    )
    yield group
    group.destroy()


# Where a rank past its deadline writes its stacks, and every rank its failures at once: not fd 2,
# which pytest captures during a test (a dump there is lost with the capture when the process
# exits); run_rank.py passes the rank's log file.
_STACKS_FD = int(os.environ.get("GROUPCOORD_TEST_STACKS_FD", "-1"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.gc_failed = report.failed  # type: ignore[attr-defined]
    if report.failed and _STACKS_FD >= 0:
        # Now, not in pytest's summary: a rank that then hangs in a collective the others left is
        # killed before any summary is printed.
        text = f"\n[failed] {item.nodeid} ({report.when})\n{report.longreprtext}\n"
        os.write(_STACKS_FD, text.encode(errors="replace"))


@pytest.fixture(autouse=True)
def agree_on_outcome(request: pytest.FixtureRequest, outcome_group: gc.GroupCoordinator):
    if _STACKS_FD >= 0:
        faulthandler.dump_traceback_later(2 * GROUP_TIMEOUT, exit=True, file=_STACKS_FD)
    else:
        faulthandler.dump_traceback_later(2 * GROUP_TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
    failed = bool(getattr(request.node, "gc_failed", False))
    flags = outcome_group.all_gather(np.array([failed], dtype=np.int32), 0)
    bad = [rank for rank, flag in enumerate(flags) if flag]
    if bad and not failed:
        pytest.fail(f"the test failed on rank(s) {bad}", pytrace=False)


@pytest.fixture
def world() -> gc.GroupCoordinator:
    return gc.get_world_group()


@pytest.fixture
def tp() -> gc.GroupCoordinator:
    return gc.get_tp_group()


@pytest.fixture
def world_size() -> int:
    return gc.get_world_group().world_size


@pytest.fixture
def rank() -> int:
    return gc.get_world_group().rank
