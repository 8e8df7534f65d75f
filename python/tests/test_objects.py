"""Objects (pickled with pickle.HIGHEST_PROTOCOL) and asynchronous sends. Objects are numpy
payloads in every flavour (they travel pickled over the CPU group); the arrays of the tensor
dicts are the flavour's (gc_testing.py), so they go through the device group."""

from __future__ import annotations

import time

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import (
    GROUP_TIMEOUT,
    arr,
    assert_result,
    ref,
    reference,
    requires_cuda_flavour,
    requires_min_world_size,
    sends_first,
)


def payload(rank: int) -> dict:
    """An object every rank can rebuild for every other rank."""
    return {"rank": rank, "text": "x" * rank, "array": reference(rank, (2, 3)), "t": (rank, None)}


def assert_payload(obj: dict, rank: int) -> None:
    expected = payload(rank)
    assert obj.keys() == expected.keys()
    np.testing.assert_array_equal(obj.pop("array"), expected.pop("array"))
    assert obj == expected


def test_broadcast_object(world: gc.GroupCoordinator) -> None:
    for src in range(world.world_size):
        mine = payload(src) if world.rank_in_group == src else None
        out = world.broadcast_object(mine, src=src)
        if world.rank_in_group == src:
            assert out is mine  # the source gets its own object back, as in vLLM
        assert_payload(dict(out), src)


def test_broadcast_object_list(world: gc.GroupCoordinator) -> None:
    src = world.world_size - 1
    objs = [payload(src), "two", 3] if world.rank_in_group == src else [None, None, None]
    out = world.broadcast_object_list(objs, src=src)
    assert out is objs  # filled in place
    assert_payload(dict(objs[0]), src)
    assert objs[1:] == ["two", 3]


@requires_min_world_size(2)
def test_send_recv_object_ring(world: gc.GroupCoordinator) -> None:
    ws, me = world.world_size, world.rank_in_group
    handle = world.isend_object(payload(me), dst=(me + 1) % ws)
    assert_payload(world.recv_object(src=(me - 1) % ws), (me - 1) % ws)
    handle.wait()
    assert handle.is_completed()
    if me == 0:
        world.send_object("blocking", dst=1)
    elif me == 1:
        assert world.recv_object(src=0) == "blocking"


@requires_min_world_size(2)
def test_100_async_sends_received_in_order(tp: gc.GroupCoordinator) -> None:
    """100 fire-and-forget isend_object and isend_tensor_dict (handles dropped) to the next
    rank; the previous rank's arrive in order."""
    ws, me = tp.world_size, tp.rank_in_group
    nxt, prev = (me + 1) % ws, (me - 1) % ws
    for i in range(100):
        tp.isend_object((me, i), dst=nxt)
    for i in range(100):
        assert tp.recv_object(src=prev) == (prev, i)

    def send_dicts() -> None:
        for i in range(100):
            tp.isend_tensor_dict({"i": i, "x": arr(reference(me, (3,)) + i)}, dst=nxt)

    def recv_dicts() -> None:
        for i in range(100):
            d = tp.recv_tensor_dict(src=prev)
            assert d["i"] == i
            assert_result(d["x"], reference(prev, (3,)) + i, what=f"dict {i}")

    # The arrays may go through NCCL: see sends_first() for the order.
    first, second = (send_dicts, recv_dicts) if sends_first(me) else (recv_dicts, send_dicts)
    first()
    second()
    tp.barrier()


@requires_min_world_size(2)
def test_isend_tensor_dict_handles(tp: gc.GroupCoordinator) -> None:
    ws, me = tp.world_size, tp.rank_in_group
    handles = []

    def send() -> None:
        handles.extend(tp.isend_tensor_dict({"a": ref(me, (4,)), "b": None}, dst=(me + 1) % ws))
        assert all(isinstance(h, gc.Handle) for h in handles)

    def recv() -> None:
        d, recv_handles, postprocess = tp.irecv_tensor_dict(src=(me - 1) % ws)
        for h in recv_handles:
            h.wait(timeout=20)
        assert postprocess == []
        assert_result(d["a"], reference((me - 1) % ws, (4,)))
        assert d["b"] is None

    # The arrays may go through NCCL: see sends_first() for the order.
    first, second = (send, recv) if sends_first(me) else (recv, send)
    first()
    second()
    for h in handles:
        h.wait()


class Unpicklable:
    """An object whose pickling raises, as a lock or an open file would."""

    def __reduce__(self):
        raise TypeError("refuses to be pickled (test)")


def expect_told(call, pattern: str, src: int = 0) -> None:
    """The waiting rank raises SourceFailedError carrying the source's error, well before the
    group's timeout (which would end it with a timeout error instead)."""
    start = time.monotonic()
    with pytest.raises(gc.SourceFailedError, match=pattern) as told:
        call()
    assert time.monotonic() - start < GROUP_TIMEOUT / 2
    assert told.value.src == src
    assert told.value.why and told.value.why in str(told.value)


@requires_min_world_size(2)
@pytest.mark.parametrize("group", ["world", "mq"])
def test_a_source_that_cannot_pickle_tells_the_others(world: gc.GroupCoordinator,
                                                      group: str) -> None:
    """broadcast_object (over the CPU group, and through the message queue from group rank 0),
    broadcast_object_list and broadcast_tensor_dict: the source raises its own error, the others
    are told at once, and the group stays in step."""
    g = world
    if group == "mq":
        g = gc.GroupCoordinator([list(range(world.world_size))], world.local_rank, "gloo", False,
                                use_message_queue_broadcaster=True, group_name="told_mq")
        assert g.mq_broadcaster is not None
    me = g.rank_in_group
    for src in range(g.world_size):
        told = f"src {src} failed instead of sending its object"
        if me == src:
            with pytest.raises(TypeError, match="refuses to be pickled"):
                g.broadcast_object(Unpicklable(), src=src)
            with pytest.raises(TypeError, match="refuses to be pickled"):
                g.broadcast_object_list([1, Unpicklable()], src=src)
            with pytest.raises(TypeError, match="refuses to be pickled"):
                g.broadcast_tensor_dict({"a": ref(0, (2,)), "b": Unpicklable()}, src=src)
            with pytest.raises(ValueError, match="obj_list must be a list"):
                g.broadcast_object_list("not a list", src=src)  # only the source can see it
            g.broadcast_object_failed("the engine's own reason", src=src)
        else:
            expect_told(lambda: g.broadcast_object(None, src=src),
                        f"{told}: TypeError: refuses to be pickled", src)
            expect_told(lambda: g.broadcast_object_list([None, None], src=src),
                        f"{told}: TypeError: refuses", src)
            expect_told(lambda: g.broadcast_tensor_dict(None, src=src),
                        f"{told}: TypeError: refuses", src)
            expect_told(lambda: g.broadcast_object_list([None], src=src),
                        f"{told}: .*obj_list must be a list", src)
            expect_told(lambda: g.broadcast_object(None, src=src),
                        f"{told}: the engine's own reason", src)
        assert g.broadcast_object("in step" if me == src else None, src=src) == "in step"
    if group == "mq":
        g.destroy()


@requires_min_world_size(2)
def test_a_sender_that_cannot_pickle_tells_its_receiver(world: gc.GroupCoordinator) -> None:
    me = world.rank_in_group
    told = "src 0 failed instead of sending"
    if me == 0:
        with pytest.raises(TypeError, match="refuses to be pickled"):
            world.send_object(Unpicklable(), dst=1)
        with pytest.raises(TypeError, match="refuses to be pickled"):
            world.isend_object(Unpicklable(), dst=1)
        with pytest.raises(TypeError, match="refuses to be pickled"):
            world.send_tensor_dict({"a": Unpicklable()}, dst=1)
        with pytest.raises(ValueError, match="keys must be str"):
            world.isend_tensor_dict({1: 2})  # dst: the next rank, 1
        world.send_object_failed("the engine's own reason", dst=1)
        world.send_object("after", dst=1)
    elif me == 1:
        expect_told(lambda: world.recv_object(src=0), f"{told}.*TypeError: refuses")
        expect_told(lambda: world.recv_object(src=0), f"{told}.*TypeError: refuses")
        expect_told(lambda: world.recv_tensor_dict(src=0), f"{told}.*TypeError: refuses")
        expect_told(lambda: world.recv_tensor_dict(src=0), f"{told}.*keys must be str")
        expect_told(lambda: world.recv_object(src=0), f"{told}.*the engine's own reason")
        assert world.recv_object(src=0) == "after"
    world.barrier()


@requires_min_world_size(2)
def test_a_bad_argument_every_rank_passes_is_raised_everywhere_and_told_nowhere(
        tp: gc.GroupCoordinator) -> None:
    """all_gather_group= is read by the receiver too: both raise ValueError, nothing is sent
    (a report the receiver never reads would fail the next receive)."""
    me = tp.rank_in_group
    if me == 0:
        with pytest.raises(ValueError, match="all_gather_group"):
            tp.send_tensor_dict({"a": 1}, dst=1, all_gather_group="tp")
    elif me == 1:
        with pytest.raises(ValueError, match="all_gather_group"):
            tp.recv_tensor_dict(src=0, all_gather_group="tp")
    if me == 0:
        tp.send_object("next", dst=1)
    elif me == 1:
        assert tp.recv_object(src=0) == "next"
    tp.barrier()


@requires_min_world_size(2)
@requires_cuda_flavour
def test_a_bad_stream_every_rank_passes_is_raised_everywhere_and_told_nowhere(
        tp: gc.GroupCoordinator) -> None:
    """stream= is read by the receivers too on a CUDA group: a wrong one makes every rank of
    broadcast_tensor_dict and of send/recv_tensor_dict raise ValueError, and the source tells
    nobody (the receivers' next receive would take its report), so the group stays in step."""
    me = tp.rank_in_group
    bad = "not a stream"
    sent = {"a": ref(0, (2,)), "n": 3}
    with pytest.raises(ValueError, match="stream must be"):
        tp.broadcast_tensor_dict(sent if me == 0 else None, src=0, stream=bad)
    assert tp.broadcast_object("next" if me == 0 else None, src=0) == "next"
    if me == 0:
        with pytest.raises(ValueError, match="stream must be"):
            tp.send_tensor_dict(sent, dst=1, stream=bad)
        with pytest.raises(ValueError, match="stream must be"):
            tp.isend_tensor_dict(sent, dst=1, stream=bad)
        tp.send_object("after", dst=1)
    elif me == 1:
        for _ in range(2):
            with pytest.raises(ValueError, match="stream must be"):
                tp.recv_tensor_dict(src=0, stream=bad)
        assert tp.recv_object(src=0) == "after"
    tp.barrier()
