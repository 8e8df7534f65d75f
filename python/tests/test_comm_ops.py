"""vLLM's tests/distributed/test_comm_ops.py (and the CPU-valid parts of test_pynccl.py) in the
suite's array flavour (gc_testing.py): every collective and v-variant against references each
rank computes for every rank, results checked to come back as the caller's type and device."""

from __future__ import annotations

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import (
    FLAVOUR,
    IS_NUMPY,
    arr,
    assert_flavour,
    assert_result,
    flavour_dtype,
    model_parallel,
    recv_kwargs,
    ref,
    reference,
    requires_cuda_flavour,
    requires_min_world_size,
    requires_torch,
    to_numpy,
)

# Per-rank sizes of the v-variants (vLLM's test_pynccl all_gatherv / reduce_scatterv).
V_SIZES = [81, 20, 57, 52, 81, 5, 49, 49]

DTYPES = [np.float32, np.float16, np.float64, np.int32, np.int64, np.int8, np.uint8]


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce(tp: gc.GroupCoordinator, dtype) -> None:
    ws = tp.world_size
    x = ref(tp.rank_in_group, (8,), dtype)
    expected = sum(reference(r, (8,), dtype) for r in range(ws)).astype(dtype)
    out = gc.tensor_model_parallel_all_reduce(x)
    assert_result(out, expected, dtype)
    if IS_NUMPY:
        assert out.flags.writeable
    assert_result(x, reference(tp.rank_in_group, (8,), dtype), what="input")  # out of place


def test_all_reduce_bool(tp: gc.GroupCoordinator) -> None:
    x = arr(np.array([tp.rank_in_group == 0, False, True]))
    out = tp.all_reduce(x)
    # sum of bools is logical or
    assert_result(out, np.array([True, False, True]), np.bool_)


@requires_torch
@pytest.mark.parametrize("op", ["all_reduce", "all_gather"])
def test_bfloat16(tp: gc.GroupCoordinator, op: str) -> None:
    """torch has bfloat16 (numpy does not): results stay bfloat16, compared through float32."""
    ws, me = tp.world_size, tp.rank_in_group
    x = arr(reference(me, (2, 3)), dtype="bfloat16")
    if op == "all_reduce":
        out = tp.all_reduce(x)
        expected = sum(reference(r, (2, 3)) for r in range(ws))
    else:
        out = tp.all_gather(x, dim=0)
        expected = np.concatenate([reference(r, (2, 3)) for r in range(ws)], axis=0)
    assert_result(out, expected, "bfloat16")


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_all_gather(tp: gc.GroupCoordinator, dim: int) -> None:
    shape = (2, 3, 4)
    out = gc.tensor_model_parallel_all_gather(ref(tp.rank_in_group, shape), dim)
    expected = np.concatenate([reference(r, shape) for r in range(tp.world_size)], axis=dim)
    assert_result(out, expected)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_reduce_scatter(tp: gc.GroupCoordinator, dim: int) -> None:
    ws = tp.world_size
    shape = [2 * ws, 3 * ws, 2 * ws]
    total = sum(reference(r, shape) for r in range(ws))
    expected = np.split(total, ws, axis=dim)[tp.rank_in_group]
    out = gc.tensor_model_parallel_reduce_scatter(ref(tp.rank_in_group, shape), dim)
    assert_result(out, expected)


@pytest.mark.parametrize("dst", [0, -1])
def test_gather(tp: gc.GroupCoordinator, dst: int) -> None:
    dst = dst % tp.world_size
    shape = (3, 2)
    out = gc.tensor_model_parallel_gather(ref(tp.rank_in_group, shape), dst=dst, dim=0)
    if tp.world_size == 1:
        assert_result(out, reference(0, shape))
    elif tp.rank_in_group == dst:
        expected = np.concatenate([reference(r, shape) for r in range(tp.world_size)], axis=0)
        assert_result(out, expected)
    else:
        assert out is None


@pytest.mark.parametrize("src", [0, -1])
def test_broadcast_in_place(tp: gc.GroupCoordinator, src: int) -> None:
    src = src % tp.world_size
    x = ref(tp.rank_in_group, (4, 5), np.float64)
    out = tp.broadcast(x, src=src)
    assert out is x
    assert_result(x, reference(src, (4, 5), np.float64))


def test_broadcast_non_contiguous(tp: gc.GroupCoordinator) -> None:
    base = ref(tp.rank_in_group, (4, 6))
    view = base[:, ::2]  # a strided view: written in place through its strides
    out = tp.broadcast(view, src=0)
    assert out is view
    assert_result(view, reference(0, (4, 6))[:, ::2])
    assert_result(base[:, 1::2], reference(tp.rank_in_group, (4, 6))[:, 1::2], what="gaps")


@requires_min_world_size(2)
@pytest.mark.parametrize("as_list", [False, True])
def test_all_gatherv(tp: gc.GroupCoordinator, as_list: bool) -> None:
    ws = tp.world_size
    sizes = V_SIZES[:ws]
    mine = reference(tp.rank_in_group, (sizes[tp.rank_in_group], 3))
    expected = np.concatenate([reference(r, (sizes[r], 3)) for r in range(ws)], axis=0)
    if as_list:
        outs = tp.all_gatherv([arr(mine), arr(mine.astype(np.int64))], dim=0, sizes=sizes)
        assert isinstance(outs, list) and len(outs) == 2
        assert_result(outs[0], expected)
        assert_result(outs[1], expected.astype(np.int64))
    else:
        assert_result(tp.all_gatherv(arr(mine), dim=0, sizes=sizes), expected)


@requires_min_world_size(2)
def test_reduce_scatterv(tp: gc.GroupCoordinator) -> None:
    ws = tp.world_size
    sizes = V_SIZES[:ws]
    shape = (sum(sizes), 3)
    total = sum(reference(r, shape) for r in range(ws))
    start = sum(sizes[: tp.rank_in_group])
    out = tp.reduce_scatterv(ref(tp.rank_in_group, shape), dim=0, sizes=sizes)
    assert_result(out, total[start : start + sizes[tp.rank_in_group]])


@requires_min_world_size(2)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_uniform_v_variants(tp: gc.GroupCoordinator, dim: int) -> None:
    """Equal sizes (None, a list, a tuple): the v-variants are all_gather / reduce_scatter (torch
    and cupy CUDA arrays take the plain calls' path, results from their own allocator)."""
    ws, me = tp.world_size, tp.rank_in_group
    mine = reference(me, (2, 3))
    gathered = np.concatenate([reference(r, (2, 3)) for r in range(ws)], axis=dim)
    for sizes in (None, [mine.shape[dim]] * ws, (mine.shape[dim],) * ws):
        assert_result(tp.all_gatherv(arr(mine), dim, sizes), gathered)
    big = reference(me, (2 * ws, 3 * ws))
    total = sum(reference(r, (2 * ws, 3 * ws)) for r in range(ws))
    part = big.shape[dim] // ws
    mine_part = np.take(total, range(me * part, (me + 1) * part), axis=dim)
    for sizes in (None, [part] * ws, (part,) * ws):
        assert_result(tp.reduce_scatterv(arr(big), dim, sizes=sizes), mine_part)


@requires_min_world_size(2)
def test_uniform_v_variant_size_mismatch(tp: gc.GroupCoordinator) -> None:
    """Uniform sizes that disagree with the input raise the v-variant's own ValueError, on every
    rank (every rank's input disagrees), and the group stays usable."""
    ws, me = tp.world_size, tp.rank_in_group
    x = arr(reference(me, (2, 3)))
    with pytest.raises(ValueError, match="all_gatherv"):
        tp.all_gatherv(x, 0, [3] * ws)
    with pytest.raises(ValueError, match="reduce_scatterv"):
        tp.reduce_scatterv(arr(reference(me, (2 * ws, 3))), 0, [3] * ws)
    assert_result(tp.all_gatherv(x, 0, [2] * ws),
                  np.concatenate([reference(r, (2, 3)) for r in range(ws)], 0))


@requires_min_world_size(2)
def test_send_recv(tp: gc.GroupCoordinator) -> None:
    """vLLM's send_recv_test_worker: a ring; each rank receives its previous rank's tensor.
    recv's dtype is given as the flavour's dtype object, and as a name."""
    ws, me = tp.world_size, tp.rank_in_group
    prev = (me - 1) % ws
    if me % 2 == 0:
        tp.send(ref(me, (5, 2)))
        dtype = np.float32 if IS_NUMPY else flavour_dtype(np.float32)  # numpy: a scalar type
        out = tp.recv((5, 2), dtype, **recv_kwargs())
    else:
        # A name gives the device's default library (set to the flavour's by conftest).
        out = tp.recv([5, 2], "float32", src=prev, **recv_kwargs())
        tp.send(ref(me, (5, 2)), dst=(me + 1) % ws)
    assert_result(out, reference(prev, (5, 2)))


@requires_min_world_size(2)
def test_recv_reads_dtype_names_as_groupcoord_does(tp: gc.GroupCoordinator) -> None:
    """A dtype name means what groupcoord's names mean ("float" is float32, as in torch; numpy
    would read float64) whichever library makes the result; a negative size is refused, naming
    it, before anything is received."""
    ws, me = tp.world_size, tp.rank_in_group
    prev = (me - 1) % ws
    with pytest.raises(ValueError, match="negative size"):
        tp.recv((-1, 2), "float32", src=prev, **recv_kwargs())
    if me % 2 == 0:
        tp.send(ref(me, (5, 2)))
        out = tp.recv((5, 2), "float", **recv_kwargs())
    else:
        out = tp.recv((5, 2), "float", src=prev, **recv_kwargs())
        tp.send(ref(me, (5, 2)), dst=(me + 1) % ws)
    assert_result(out, reference(prev, (5, 2)))


def check_received_dict(got: dict, sent: dict) -> None:
    """`got` has `sent`'s keys in order; arrays (sent as flavour arrays) equal and of the flavour
    on this rank's device, numpy arrays as numpy, everything else equal."""
    assert list(got) == list(sent)
    for key, value in sent.items():
        host_numpy = isinstance(value, np.ndarray)
        if host_numpy and not IS_NUMPY:
            # A numpy array in another flavour's dict (the CUDA flavours' mixed dicts): numpy on
            # the receiver too, the CPU default there.
            assert isinstance(got[key], np.ndarray), f"{key}: {type(got[key])}"
            assert got[key].dtype == value.dtype, f"{key}: {got[key].dtype}"
            np.testing.assert_array_equal(got[key], value)
        elif host_numpy or hasattr(value, "__dlpack__"):
            assert_result(got[key], to_numpy(value), what=key)
        else:
            assert got[key] == value, key


def test_broadcast_tensor_dict(tp: gc.GroupCoordinator) -> None:
    """vLLM's broadcast_tensor_dict_test_worker, plus an empty tensor and key order."""
    test_dict = {
        "a": arr(np.arange(8, dtype=np.float32)),
        "b": arr(np.arange(16, dtype=np.int8)),
        "c": "test",
        "d": [1, 2, 3],
        "e": {"a": 1, "b": 2},
        "f": arr(np.empty((0, 3), dtype=np.float32)),
        "g": arr(np.array([True, False])),
    }
    if tp.rank_in_group == 0:
        assert gc.broadcast_tensor_dict(test_dict, src=0) is test_dict
    else:
        check_received_dict(gc.broadcast_tensor_dict(src=0), test_dict)


@requires_cuda_flavour
@requires_min_world_size(2)
def test_tensor_dict_mixing_host_and_device(world_size: int) -> None:
    """A dict with CPU numpy and CUDA values: host arrays travel over the CPU group and come back
    as numpy, device arrays through the device communicator and come back as the flavour on the
    receiver's GPU. Broadcast within TP, and stage to stage."""
    tp = gc.get_tp_group()
    sent = {"host": np.arange(6, dtype=np.int64).reshape(2, 3), "dev": arr(reference(0, (4,))),
            "n": 5, "host_empty": np.zeros((0,), np.float32), "dev_bool": arr(np.array([True]))}
    if tp.rank_in_group == 0:
        assert tp.broadcast_tensor_dict(sent, src=0) is sent
    else:
        check_received_dict(tp.broadcast_tensor_dict(src=0), sent)
    with model_parallel(tensor_model_parallel_size=world_size // 2, pipeline_model_parallel_size=2):
        pp = gc.get_pp_group()
        if pp.is_first_rank:
            pp.send_tensor_dict(sent)
        else:
            check_received_dict(pp.recv_tensor_dict(), sent)


@requires_min_world_size(2)
@pytest.mark.parametrize("use_all_gather", [False, True])
def test_send_recv_tensor_dict_pipeline(world_size: int, use_all_gather: bool) -> None:
    """vLLM's send_recv_tensor_dict_test_worker: pipeline stages hand a dict to the next stage;
    with all_gather_group=TP each TP rank sends a slice and the receiver all_gathers it.
    "residual" differs per TP rank, so all_gather_tensors turns the optimisation off for it."""

    tp_size = world_size // 2
    with model_parallel(tensor_model_parallel_size=tp_size, pipeline_model_parallel_size=2):
        tp, pp = gc.get_tp_group(), gc.get_pp_group()
        assert pp.world_size == 2
        shared_np = np.arange(4 * tp_size * 3, dtype=np.float32).reshape(4 * tp_size, 3)
        shared = arr(shared_np)
        residual = reference(tp.rank_in_group, (3, 7))
        kwargs = {}
        if use_all_gather:
            kwargs = {"all_gather_group": tp, "all_gather_tensors": {"residual": False}}
        if pp.is_first_rank:
            d = {"hidden": shared, "residual": arr(residual), "meta": ("x", 3),
                 "empty": shared[:0]}
            assert pp.send_tensor_dict(d, **kwargs) is None
        else:
            out = pp.recv_tensor_dict(**kwargs)
            assert list(out) == ["hidden", "residual", "meta", "empty"]
            assert_result(out["hidden"], shared_np, what="hidden")
            assert_result(out["residual"], residual, what="residual")
            assert out["meta"] == ("x", 3)
            assert_result(out["empty"], shared_np[:0], what="empty")


@requires_min_world_size(2)
def test_irecv_tensor_dict_with_all_gather(world_size: int) -> None:
    tp_size = world_size // 2
    with model_parallel(tensor_model_parallel_size=tp_size, pipeline_model_parallel_size=2):
        tp, pp = gc.get_tp_group(), gc.get_pp_group()
        shared = np.arange(6 * tp_size, dtype=np.int64).reshape(2 * tp_size, 3)
        if pp.is_first_rank:
            handles = pp.isend_tensor_dict({"h": arr(shared), "n": 7}, all_gather_group=tp)
            assert len(handles) >= 1
            for h in handles:
                h.wait()
                assert h.is_completed()
        else:
            d, handles, postprocess = pp.irecv_tensor_dict(all_gather_group=tp)
            for h in handles:
                h.wait()
            for fn in postprocess:
                fn()
            assert d["n"] == 7
            assert_result(d["h"], shared)


def test_flavour_sanity(tp: gc.GroupCoordinator) -> None:
    """The flavour helpers themselves: arr() gives the flavour on the rank's device, to_numpy()
    reads it back (so a broken helper cannot make every other test pass vacuously)."""
    x = arr(np.arange(3, dtype=np.int32))
    assert_flavour(x, "arr()")
    np.testing.assert_array_equal(to_numpy(x), [0, 1, 2])
    with pytest.raises(AssertionError):
        assert_result(x, np.arange(1, 4, dtype=np.int32))
    assert FLAVOUR in ("numpy", "torch-cpu", "torch-cuda", "cupy")
