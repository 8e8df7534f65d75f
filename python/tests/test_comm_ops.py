"""vLLM's tests/distributed/test_comm_ops.py (and the CPU-valid parts of test_pynccl.py) with
numpy: every collective and v-variant against references each rank computes for every rank."""

from __future__ import annotations

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import model_parallel, reference, requires_min_world_size

# Per-rank sizes of the v-variants (vLLM's test_pynccl all_gatherv / reduce_scatterv).
V_SIZES = [81, 20, 57, 52, 81, 5, 49, 49]

DTYPES = [np.float32, np.float16, np.float64, np.int32, np.int64, np.int8, np.uint8]


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce(tp: gc.GroupCoordinator, dtype) -> None:
    ws = tp.world_size
    x = reference(tp.rank_in_group, (8,), dtype)
    expected = sum(reference(r, (8,), dtype) for r in range(ws)).astype(dtype)
    out = gc.tensor_model_parallel_all_reduce(x)
    assert isinstance(out, np.ndarray) and out.dtype == dtype and out.flags.writeable
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(x, reference(tp.rank_in_group, (8,), dtype))  # out of place


def test_all_reduce_bool(tp: gc.GroupCoordinator) -> None:
    x = np.array([tp.rank_in_group == 0, False, True])
    out = tp.all_reduce(x)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, [True, False, True])  # sum of bools is logical or


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_all_gather(tp: gc.GroupCoordinator, dim: int) -> None:
    shape = (2, 3, 4)
    out = gc.tensor_model_parallel_all_gather(reference(tp.rank_in_group, shape), dim)
    expected = np.concatenate([reference(r, shape) for r in range(tp.world_size)], axis=dim)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_reduce_scatter(tp: gc.GroupCoordinator, dim: int) -> None:
    ws = tp.world_size
    shape = [2 * ws, 3 * ws, 2 * ws]
    total = sum(reference(r, shape) for r in range(ws))
    expected = np.split(total, ws, axis=dim)[tp.rank_in_group]
    out = gc.tensor_model_parallel_reduce_scatter(reference(tp.rank_in_group, shape), dim)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dst", [0, -1])
def test_gather(tp: gc.GroupCoordinator, dst: int) -> None:
    dst = dst % tp.world_size
    shape = (3, 2)
    out = gc.tensor_model_parallel_gather(reference(tp.rank_in_group, shape), dst=dst, dim=0)
    if tp.world_size == 1:
        np.testing.assert_array_equal(out, reference(0, shape))
    elif tp.rank_in_group == dst:
        expected = np.concatenate([reference(r, shape) for r in range(tp.world_size)], axis=0)
        np.testing.assert_array_equal(out, expected)
    else:
        assert out is None


@pytest.mark.parametrize("src", [0, -1])
def test_broadcast_in_place(tp: gc.GroupCoordinator, src: int) -> None:
    src = src % tp.world_size
    x = reference(tp.rank_in_group, (4, 5), np.float64)
    out = tp.broadcast(x, src=src)
    assert out is x
    np.testing.assert_array_equal(x, reference(src, (4, 5), np.float64))


def test_broadcast_non_contiguous(tp: gc.GroupCoordinator) -> None:
    base = reference(tp.rank_in_group, (4, 6))
    view = base[:, ::2]  # a strided view: written in place through its strides
    out = tp.broadcast(view, src=0)
    assert out is view
    np.testing.assert_array_equal(view, reference(0, (4, 6))[:, ::2])
    np.testing.assert_array_equal(base[:, 1::2], reference(tp.rank_in_group, (4, 6))[:, 1::2])


@requires_min_world_size(2)
@pytest.mark.parametrize("as_list", [False, True])
def test_all_gatherv(tp: gc.GroupCoordinator, as_list: bool) -> None:
    ws = tp.world_size
    sizes = V_SIZES[:ws]
    mine = reference(tp.rank_in_group, (sizes[tp.rank_in_group], 3))
    expected = np.concatenate([reference(r, (sizes[r], 3)) for r in range(ws)], axis=0)
    if as_list:
        outs = tp.all_gatherv([mine, mine.astype(np.int64)], dim=0, sizes=sizes)
        assert isinstance(outs, list) and len(outs) == 2
        np.testing.assert_array_equal(outs[0], expected)
        np.testing.assert_array_equal(outs[1], expected.astype(np.int64))
    else:
        np.testing.assert_array_equal(tp.all_gatherv(mine, dim=0, sizes=sizes), expected)


@requires_min_world_size(2)
def test_reduce_scatterv(tp: gc.GroupCoordinator) -> None:
    ws = tp.world_size
    sizes = V_SIZES[:ws]
    shape = (sum(sizes), 3)
    total = sum(reference(r, shape) for r in range(ws))
    start = sum(sizes[: tp.rank_in_group])
    out = tp.reduce_scatterv(reference(tp.rank_in_group, shape), dim=0, sizes=sizes)
    np.testing.assert_array_equal(out, total[start : start + sizes[tp.rank_in_group]])


@requires_min_world_size(2)
def test_send_recv(tp: gc.GroupCoordinator) -> None:
    """vLLM's send_recv_test_worker: a ring; each rank receives its previous rank's tensor."""
    ws, me = tp.world_size, tp.rank_in_group
    prev = (me - 1) % ws
    if me % 2 == 0:
        tp.send(reference(me, (5, 2)))
        out = tp.recv((5, 2), np.float32)
    else:
        out = tp.recv([5, 2], "float32", src=prev)
        tp.send(reference(me, (5, 2)), dst=(me + 1) % ws)
    np.testing.assert_array_equal(out, reference(prev, (5, 2)))


def test_broadcast_tensor_dict(tp: gc.GroupCoordinator) -> None:
    """vLLM's broadcast_tensor_dict_test_worker, plus an empty tensor and key order."""
    test_dict = {
        "a": np.arange(8, dtype=np.float32),
        "b": np.arange(16, dtype=np.int8),
        "c": "test",
        "d": [1, 2, 3],
        "e": {"a": 1, "b": 2},
        "f": np.empty((0, 3), dtype=np.float32),
        "g": np.array([True, False]),
    }
    if tp.rank_in_group == 0:
        assert gc.broadcast_tensor_dict(test_dict, src=0) is test_dict
    else:
        recv_dict = gc.broadcast_tensor_dict(src=0)
        assert list(recv_dict) == list(test_dict)
        for key, value in test_dict.items():
            if isinstance(value, np.ndarray):
                assert recv_dict[key].dtype == value.dtype
                assert recv_dict[key].shape == value.shape
                np.testing.assert_array_equal(recv_dict[key], value)
            else:
                assert recv_dict[key] == value


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
        shared = np.arange(4 * tp_size * 3, dtype=np.float32).reshape(4 * tp_size, 3)
        residual = reference(tp.rank_in_group, (3, 7))
        kwargs = {}
        if use_all_gather:
            kwargs = {"all_gather_group": tp, "all_gather_tensors": {"residual": False}}
        if pp.is_first_rank:
            d = {"hidden": shared, "residual": residual, "meta": ("x", 3), "empty": shared[:0]}
            assert pp.send_tensor_dict(d, **kwargs) is None
        else:
            out = pp.recv_tensor_dict(**kwargs)
            assert list(out) == ["hidden", "residual", "meta", "empty"]
            np.testing.assert_array_equal(out["hidden"], shared)
            np.testing.assert_array_equal(out["residual"], residual)
            assert out["meta"] == ("x", 3) and out["empty"].shape == (0, 3)


@requires_min_world_size(2)
def test_irecv_tensor_dict_with_all_gather(world_size: int) -> None:
    tp_size = world_size // 2
    with model_parallel(tensor_model_parallel_size=tp_size, pipeline_model_parallel_size=2):
        tp, pp = gc.get_tp_group(), gc.get_pp_group()
        shared = np.arange(6 * tp_size, dtype=np.int64).reshape(2 * tp_size, 3)
        if pp.is_first_rank:
            handles = pp.isend_tensor_dict({"h": shared, "n": 7}, all_gather_group=tp)
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
            np.testing.assert_array_equal(d["h"], shared)
