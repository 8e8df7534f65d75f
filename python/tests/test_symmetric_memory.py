"""NCCL symmetric memory through the Python GroupCoordinator: symmetric_empty,
reserve_symmetric_scratch and symmetric_memory_stats (groupcoord.SymmetricMemoryStats).

On CPU flavours the calls must say clearly that symmetric memory needs the nccl backend. On a
CUDA flavour run with GROUPCOORD_USE_NCCL_SYMM_MEM=1 (ctest's pytest_symm_*_np2), the TP
group's communicator has it on: symmetric_empty arrays go through all_gather / reduce_scatter /
all_reduce without the input copy, results match the references, and the counters say so.
"""

from __future__ import annotations

import numpy as np
import pytest

import groupcoord as gc

from gc_testing import (ON_CUDA, FLAVOUR, arr, assert_result, flavour_dtype, recv_kwargs,
                        reference)


def test_stats_are_readable(tp: gc.GroupCoordinator) -> None:
    s = tp.symmetric_memory_stats
    assert isinstance(s, gc.SymmetricMemoryStats)
    assert "SymmetricMemoryStats(" in repr(s)
    for name in ("windows_registered", "symmetric_calls", "fallbacks", "zero_copy_calls",
                 "scratch_bytes", "pool_bytes"):
        assert getattr(s, name) >= 0, name
    if not s.enabled:
        assert s.disabled_reason, "a disabled path always says why"
    if tp.world_size == 1:
        assert not s.enabled and "world size 1" in s.disabled_reason


@pytest.mark.skipif(ON_CUDA, reason="CPU flavours only")
def test_cpu_groups_have_no_symmetric_memory(tp: gc.GroupCoordinator) -> None:
    if tp.world_size == 1:  # no communicator: a plain array, nothing to reserve
        a = tp.symmetric_empty((2, 3), np.float32)
        assert a.shape == (2, 3)
        tp.reserve_symmetric_scratch(1 << 20)
        return
    with pytest.raises(ValueError, match="symmetric_empty.*nccl backend"):
        tp.symmetric_empty((4,), np.float32)
    with pytest.raises(ValueError, match="reserve_symmetric_scratch.*nccl backend"):
        tp.reserve_symmetric_scratch(1 << 20)


def _enabled_or_skip(tp: gc.GroupCoordinator) -> gc.SymmetricMemoryStats:
    s = tp.symmetric_memory_stats
    if not s.enabled:
        pytest.skip(f"symmetric memory off for {tp.unique_name}: {s.disabled_reason}")
    return s


@pytest.mark.skipif(not ON_CUDA, reason="CUDA flavours only")
def test_symmetric_empty_is_zero_copy(tp: gc.GroupCoordinator) -> None:
    before = _enabled_or_skip(tp)
    ws, me = tp.world_size, tp.rank_in_group
    n = 1024 * ws
    x = tp.symmetric_empty((n,), flavour_dtype(np.float32), **recv_kwargs())
    x[...] = arr(reference(me, (n,)))
    gathered = tp.all_gather(x, 0)
    scattered = tp.reduce_scatter(x, 0)
    reduced = tp.all_reduce(x)
    every = [reference(r, (n,)) for r in range(ws)]
    assert_result(gathered, np.concatenate(every), what="all_gather of a symmetric array")
    assert_result(scattered, sum(every)[me * 1024:(me + 1) * 1024], what="reduce_scatter")
    assert_result(reduced, sum(every), what="all_reduce")
    after = tp.symmetric_memory_stats
    assert after.zero_copy_calls >= before.zero_copy_calls + 2  # all_reduce follows the table
    assert after.symmetric_calls >= before.symmetric_calls + 2


@pytest.mark.skipif(not ON_CUDA, reason="CUDA flavours only")
def test_routed_calls_register_no_more_windows(tp: gc.GroupCoordinator) -> None:
    _enabled_or_skip(tp)
    ws, me = tp.world_size, tp.rank_in_group
    tp.reserve_symmetric_scratch(8 << 20)
    windows = tp.symmetric_memory_stats.windows_registered
    for i in range(50):
        x = arr(reference(me + i, (64 * ws, 3)))
        out = tp.all_gather(x, 0)
        expected = np.concatenate([reference(r + i, (64 * ws, 3)) for r in range(ws)])
        assert_result(out, expected, what=f"all_gather {i}")
    assert tp.symmetric_memory_stats.windows_registered == windows


@pytest.mark.skipif(FLAVOUR != "torch-cuda", reason="torch-cuda flavour only")
def test_symmetric_empty_with_torch_dtype_is_torch(tp: gc.GroupCoordinator) -> None:
    _enabled_or_skip(tp)
    import torch

    t = tp.symmetric_empty([8, 4], torch.bfloat16)
    assert isinstance(t, torch.Tensor) and t.is_cuda and t.dtype == torch.bfloat16
    assert tuple(t.shape) == (8, 4)
