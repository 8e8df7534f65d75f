"""Arrays in and out: numpy through its array API, anything else through __dlpack__; results
come back as the caller's type without copies.

numpy's own checks: the inputs are numpy (or DLPack-only wrappers of numpy) in every flavour, so
in the CUDA flavours they exercise the host path of nccl groups. Tests whose results depend on
numpy being the default library of results without an input to mirror run only in the numpy
flavour (the other flavours point that default at their own library, see gc_testing.py)."""

from __future__ import annotations

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import (
    DLPackOnly,
    reference,
    requires_min_world_size,
    requires_numpy_flavour,
    requires_world_size,
)


def expected_sum(tp: gc.GroupCoordinator, shape, dtype=np.float32) -> np.ndarray:
    return sum(reference(r, shape, dtype) for r in range(tp.world_size)).astype(dtype)


@requires_min_world_size(2)
def test_numpy_results_are_writable_numpy(tp: gc.GroupCoordinator) -> None:
    out = tp.all_reduce(reference(tp.rank_in_group, (3, 2)))
    assert type(out) is np.ndarray and out.flags.writeable and out.flags.c_contiguous
    out += 1  # a plain writable array
    np.testing.assert_array_equal(out, expected_sum(tp, (3, 2)) + 1)


@requires_numpy_flavour
def test_dlpack_only_producer(tp: gc.GroupCoordinator) -> None:
    x = reference(tp.rank_in_group, (5,))
    out = tp.all_reduce(DLPackOnly(x))
    if tp.world_size == 1:
        assert isinstance(out, DLPackOnly)  # bypassed: the input itself
        return
    assert isinstance(out, np.ndarray)  # no from_dlpack in its module: the CPU default
    np.testing.assert_array_equal(out, expected_sum(tp, (5,)))


@requires_min_world_size(2)
def test_dlpack_producer_written_in_place(tp: gc.GroupCoordinator) -> None:
    x = reference(tp.rank_in_group, (4,))
    wrapper = DLPackOnly(x)
    assert tp.broadcast(wrapper, src=1) is wrapper
    np.testing.assert_array_equal(x, reference(1, (4,)))


@requires_numpy_flavour
@requires_min_world_size(2)
def test_groupcoord_tensor_round_trip(tp: gc.GroupCoordinator) -> None:
    gc.set_default_array_library("dlpack")
    try:
        if tp.rank_in_group == 0:
            tp.send(reference(0, (2, 3)), dst=1)
        elif tp.rank_in_group == 1:
            t = tp.recv((2, 3), "float32", src=0)
            assert isinstance(t, gc.Tensor)
            assert (t.shape, t.dtype, t.device, t.strides) == ((2, 3), "float32", "cpu", (3, 1))
            assert t.__dlpack_device__() == (1, 0)
            np.testing.assert_array_equal(np.from_dlpack(t), reference(0, (2, 3)))
            view = np.asarray(t)
            assert view.flags.writeable
            view[0, 0] = 42  # shares the tensor's memory
            assert t.numpy()[0, 0] == 42
    finally:
        gc.set_default_array_library("numpy")
    assert gc.get_default_array_library() == "numpy"


@requires_numpy_flavour
@requires_min_world_size(2)
def test_recv_array_library_and_dtypes(tp: gc.GroupCoordinator) -> None:
    if tp.rank_in_group == 0:
        tp.send(np.arange(4, dtype=np.float16), dst=1)
        tp.send(np.arange(4, dtype=np.float16), dst=1)
        tp.send(np.arange(4, dtype=np.int64), dst=1)
    elif tp.rank_in_group == 1:
        raw = tp.recv(4, "bfloat16", src=0)  # numpy has no bfloat16: a groupcoord.Tensor
        assert isinstance(raw, gc.Tensor) and raw.dtype == "bfloat16"
        t = tp.recv((4,), np.float16, src=0, array_library="dlpack")
        assert isinstance(t, gc.Tensor)
        np.testing.assert_array_equal(np.asarray(t), np.arange(4, dtype=np.float16))
        out = tp.recv((4,), np.dtype("int64"), src=0)
        np.testing.assert_array_equal(out, np.arange(4))


def test_zero_dim_and_empty(tp: gc.GroupCoordinator) -> None:
    scalar = np.array(tp.rank_in_group + 1.0, dtype=np.float32)
    out = tp.all_reduce(scalar)
    assert out.shape == ()
    assert float(out) == sum(r + 1.0 for r in range(tp.world_size))
    empty = tp.all_reduce(np.zeros((0, 4), dtype=np.float32))
    assert empty.shape == (0, 4)


def test_stream_keyword_is_accepted_on_cpu(tp: gc.GroupCoordinator) -> None:
    out = tp.all_reduce(reference(tp.rank_in_group, (2,)), stream=12345)
    np.testing.assert_array_equal(out, expected_sum(tp, (2,)))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", np.float64, np.int8, bool])
def test_dtype_arguments(tp: gc.GroupCoordinator, dtype) -> None:
    if tp.world_size == 1:
        with pytest.raises(ValueError, match="No device communicator"):
            tp.recv((1,), dtype)


def test_torch_if_available(tp: gc.GroupCoordinator) -> None:
    torch = pytest.importorskip("torch")
    x = torch.arange(4, dtype=torch.float32) + tp.rank_in_group
    out = tp.all_reduce(x)
    assert isinstance(out, torch.Tensor)
    assert torch.equal(out, sum(torch.arange(4.0) + r for r in range(tp.world_size)))


def test_a_reference_dropped_without_the_gil_never_waits_for_it() -> None:
    """The last reference to an array a tensor viewed may die on a thread that does not hold the
    GIL (a helper thread, a lock holder) while another thread holds it: that thread must not wait
    for the GIL (python/src/deferred_release.h); the interpreter drops the reference soon after."""
    import sys

    obj = np.zeros(3)
    before = sys.getrefcount(obj)
    assert gc._groupcoord._release_on_another_thread(obj), "the thread waited for the GIL"
    for _ in range(100_000):
        if sys.getrefcount(obj) == before:
            break
    assert sys.getrefcount(obj) == before


_DEFAULT_LIBRARY_SCRIPT = """
import sys
import groupcoord as gc
print(gc.get_default_array_library())
import torch
print(gc.get_default_array_library())
gc.set_default_array_library("numpy")
print(gc.get_default_array_library())
"""


@requires_world_size(1)
def test_cpu_default_follows_torch_once_imported() -> None:
    """A fresh process: numpy results until the program imports torch, torch tensors after (as a
    torch engine expects from vLLM); set_default_array_library overrides both."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _DEFAULT_LIBRARY_SCRIPT], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["numpy", "torch", "numpy"], done.stdout
