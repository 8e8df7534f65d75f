"""Helpers shared by the test modules (imported as a plain module: pytest puts this folder on
sys.path)."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import numpy as np
import pytest

import groupcoord as gc

# Deadline of every group in the suite (seconds): long enough for an oversubscribed 2-core
# machine, short enough that a mismatch fails fast.
GROUP_TIMEOUT = 30.0


def launcher_world_size() -> int:
    """The world size the launcher announces (known before any test runs, for skip marks)."""
    for name in ("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "PMI_SIZE"):
        if name in os.environ:
            return int(os.environ[name])
    return 1


@contextlib.contextmanager
def model_parallel(**sizes: int) -> Iterator[None]:
    """Re-initialises the model-parallel groups with `sizes` for the block, then restores TP over
    the whole world. Collective."""
    gc.destroy_model_parallel()
    gc.initialize_model_parallel(**sizes, backend="gloo")
    try:
        yield
    finally:
        gc.get_world_group().barrier()
        gc.destroy_model_parallel()
        gc.initialize_model_parallel(
            tensor_model_parallel_size=gc.get_world_group().world_size, backend="gloo"
        )


def requires_world_size(*sizes: int):
    """Skips a test unless the world size is one of `sizes` (the same decision on every rank)."""
    ws = launcher_world_size()
    return pytest.mark.skipif(ws not in sizes, reason=f"needs world size in {sizes}, have {ws}")


def requires_min_world_size(n: int):
    ws = launcher_world_size()
    return pytest.mark.skipif(ws < n, reason=f"needs world size >= {n}, have {ws}")


def reference(rank: int, shape, dtype=np.float32) -> np.ndarray:
    """Rank r's input, which every rank can compute for every other rank: f(r, i) = 3 r + i % 5.
    Small integers: exact in every dtype, and sums over 4 ranks still fit in int8."""
    n = int(np.prod(shape)) if len(shape) else 1
    return (rank * 3 + np.arange(n) % 5).astype(dtype).reshape(shape)
