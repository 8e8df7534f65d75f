"""``out=`` on all_reduce, all_gather and reduce_scatter (GroupCoordinator, DeviceCommunicator
and the communication_op helpers), in the suite's array flavour (gc_testing.py): the result is
written into ``out`` and ``out`` itself comes back; an ``out`` of the wrong shape, dtype or device,
or not contiguous, raises ValueError naming the group and the op on every rank before anything is
sent (so the group stays usable). References are numpy, computed for every rank."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import (
    DLPackOnly,
    arr,
    assert_result,
    ref,
    reference,
    requires_cuda_flavour,
    requires_min_world_size,
    requires_numpy_flavour,
)

SHAPE = (4, 6)


def total(ws: int, shape=SHAPE, dtype=np.float32) -> np.ndarray:
    return sum(reference(r, shape, dtype) for r in range(ws)).astype(dtype)


def expected_result(op: str, ws: int, me: int, dim: int) -> np.ndarray:
    """numpy's answer for `op` on the suite's inputs of SHAPE."""
    if op == "all_reduce":
        return total(ws)
    if op == "all_gather":
        return np.concatenate([reference(r, SHAPE) for r in range(ws)], axis=dim)
    return np.split(total(ws), ws, axis=dim)[me]


def zeros(shape, dtype=np.float32) -> Any:
    """A flavour array of zeros (its own memory)."""
    return arr(np.zeros(shape, dtype=dtype))


def call(target: Any, op: str, x: Any, dim: int, out: Any) -> Any:
    if op == "all_reduce":
        return target.all_reduce(x, out=out)
    return getattr(target, op)(x, dim, out=out)


OPS = [("all_reduce", 0), ("all_gather", 0), ("all_gather", 1), ("all_gather", -1),
       ("reduce_scatter", 0), ("reduce_scatter", -1)]


def result_shape(op: str, ws: int, dim: int) -> tuple:
    shape = list(SHAPE)
    if op == "all_gather":
        shape[dim] *= ws
    elif op == "reduce_scatter":
        shape[dim] //= ws
    return tuple(shape)


def scatterable(op: str, ws: int, dim: int) -> bool:
    return op != "reduce_scatter" or SHAPE[dim] % ws == 0


@pytest.mark.parametrize("op,dim", OPS)
def test_out_is_written_and_returned(tp: gc.GroupCoordinator, op: str, dim: int) -> None:
    ws, me = tp.world_size, tp.rank_in_group
    if not scatterable(op, ws, dim):
        pytest.skip(f"{SHAPE[dim]} rows do not split over {ws} ranks")
    x = ref(me, SHAPE)
    out = zeros(result_shape(op, ws, dim))
    assert call(tp, op, x, dim, out) is out
    assert_result(out, expected_result(op, ws, me, dim))
    assert_result(x, reference(me, SHAPE), what="input")  # untouched


@requires_min_world_size(2)
@pytest.mark.parametrize("op,dim", OPS)
def test_device_communicator_out(tp: gc.GroupCoordinator, op: str, dim: int) -> None:
    ws, me = tp.world_size, tp.rank_in_group
    if not scatterable(op, ws, dim):
        pytest.skip(f"{SHAPE[dim]} rows do not split over {ws} ranks")
    comm = tp.device_communicator
    out = zeros(result_shape(op, ws, dim))
    assert call(comm, op, ref(me, SHAPE), dim, out) is out
    assert_result(out, expected_result(op, ws, me, dim))


def test_positional_out(tp: gc.GroupCoordinator) -> None:
    """out follows dim positionally, as the signatures read: all_gather(input_, dim, out)."""
    ws, me = tp.world_size, tp.rank_in_group
    out = zeros((SHAPE[0] * ws, SHAPE[1]))
    assert tp.all_gather(ref(me, SHAPE), 0, out) is out
    assert_result(out, expected_result("all_gather", ws, me, 0))
    out2 = zeros(SHAPE)
    assert tp.all_reduce(ref(me, SHAPE), out2) is out2
    assert_result(out2, total(ws))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8])
def test_all_reduce_in_place(tp: gc.GroupCoordinator, dtype) -> None:
    """out may be the input itself: the sum replaces it."""
    x = ref(tp.rank_in_group, SHAPE, dtype)
    assert tp.all_reduce(x, out=x) is x
    assert_result(x, total(tp.world_size, SHAPE, dtype))


def test_communication_op_helpers_forward_out(tp: gc.GroupCoordinator) -> None:
    ws, me = tp.world_size, tp.rank_in_group
    out = zeros(SHAPE)
    assert gc.tensor_model_parallel_all_reduce(ref(me, SHAPE), out=out) is out
    assert_result(out, total(ws))
    gathered = zeros((SHAPE[0], SHAPE[1] * ws))
    assert gc.tensor_model_parallel_all_gather(ref(me, SHAPE), -1, out=gathered) is gathered
    assert_result(gathered, expected_result("all_gather", ws, me, -1))
    if SHAPE[0] % ws == 0:
        part = zeros(result_shape("reduce_scatter", ws, 0))
        assert gc.tensor_model_parallel_reduce_scatter(ref(me, SHAPE), 0, out=part) is part
        assert_result(part, expected_result("reduce_scatter", ws, me, 0))


# ---- mismatches ------------------------------------------------------------------------------

def wrong_shape(op: str, ws: int) -> Any:
    shape = result_shape(op, ws, 0)
    return zeros((shape[0] + 1, shape[1]))


def wrong_dtype(op: str, ws: int) -> Any:
    return zeros(result_shape(op, ws, 0), np.float64)


def not_contiguous(op: str, ws: int) -> Any:
    rows, cols = result_shape(op, ws, 0)
    return zeros((rows, 2 * cols))[:, ::2]  # the right shape, every other column


MISMATCHES: dict[str, tuple[Callable[[str, int], Any], str]] = {
    "shape": (wrong_shape, "out has shape"),
    "dtype": (wrong_dtype, "out has dtype float64"),
    "non-contiguous": (not_contiguous, "out must be contiguous"),
}


def check_usable(tp: gc.GroupCoordinator) -> None:
    """The group still pairs up after every rank raised."""
    out = zeros(SHAPE)
    assert tp.all_reduce(ref(tp.rank_in_group, SHAPE), out=out) is out
    assert_result(out, total(tp.world_size))


@pytest.mark.parametrize("mismatch", sorted(MISMATCHES))
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_mismatched_out_raises(tp: gc.GroupCoordinator, op: str, mismatch: str) -> None:
    ws = tp.world_size
    if not scatterable(op, ws, 0):
        pytest.skip(f"{SHAPE[0]} rows do not split over {ws} ranks")
    make, message = MISMATCHES[mismatch]
    out = make(op, ws)
    with pytest.raises(ValueError, match=message) as error:
        call(tp, op, ref(tp.rank_in_group, SHAPE), 0, out)
    text = str(error.value)
    assert tp.unique_name in text and op in text, text  # names the group and the op
    check_usable(tp)


@requires_min_world_size(2)
def test_device_communicator_mismatch_raises(tp: gc.GroupCoordinator) -> None:
    with pytest.raises(ValueError, match="all_gather.*out has shape") as error:
        tp.device_communicator.all_gather(ref(tp.rank_in_group, SHAPE), 0, out=zeros(SHAPE))
    assert tp.unique_name in str(error.value)
    check_usable(tp)


@requires_cuda_flavour
def test_out_on_another_device_raises(tp: gc.GroupCoordinator) -> None:
    """A host out for a CUDA input (and the reverse): refused, naming the device."""
    x = ref(tp.rank_in_group, SHAPE)
    with pytest.raises(ValueError, match="out must be on cuda") as error:
        tp.all_reduce(x, out=np.zeros(SHAPE, np.float32))
    assert tp.unique_name in str(error.value) and "all_reduce" in str(error.value)
    with pytest.raises(ValueError, match="out must be on cpu"):
        tp.all_reduce(reference(tp.rank_in_group, SHAPE), out=zeros(SHAPE))
    check_usable(tp)


@requires_numpy_flavour
def test_read_only_out_raises(tp: gc.GroupCoordinator) -> None:
    out = np.zeros(SHAPE, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only") as error:
        tp.all_reduce(reference(tp.rank_in_group, SHAPE), out=out)
    assert tp.unique_name in str(error.value)
    check_usable(tp)


@requires_numpy_flavour
def test_dlpack_only_out(tp: gc.GroupCoordinator) -> None:
    """out may be any writable DLPack producer, not only the input's library."""
    backing = np.zeros(SHAPE, np.float32)
    out = DLPackOnly(backing)
    assert tp.all_reduce(reference(tp.rank_in_group, SHAPE), out=out) is out
    np.testing.assert_array_equal(backing, total(tp.world_size))
