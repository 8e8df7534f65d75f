"""World size 1 bypasses exactly as vLLM: collectives return their input object itself, the
point-to-point tensor-dict calls do nothing, and calls that need a device communicator raise.
Arrays are the suite's flavour (gc_testing.py)."""

from __future__ import annotations

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import (
    IS_NUMPY,
    arr,
    assert_result,
    flavour_dtype,
    recv_kwargs,
    ref,
    reference,
    requires_world_size,
)

pytestmark = requires_world_size(1)


def test_collectives_return_their_input(tp: gc.GroupCoordinator) -> None:
    x = ref(0, (2, 3))
    assert tp.all_reduce(x) is x
    assert tp.all_gather(x, dim=5) is x  # bypassed before the dim check, as vLLM
    assert tp.reduce_scatter(x) is x
    assert tp.gather(x, dst=0) is x
    assert tp.broadcast(x, src=0) is x
    with pytest.raises(ValueError):
        tp.broadcast(x, src=1)


def test_out_gets_a_copy_of_the_input(tp: gc.GroupCoordinator) -> None:
    """With out= the bypass copies the input into out (checked as at any size) and returns out;
    out may be the input itself."""
    x = ref(0, (2, 3))
    for call in (lambda o: tp.all_reduce(x, out=o), lambda o: tp.all_gather(x, 1, out=o),
                 lambda o: tp.reduce_scatter(x, 0, out=o)):
        out = arr(np.zeros((2, 3), dtype=np.float32))
        assert call(out) is out
        assert_result(out, reference(0, (2, 3)))
        assert call(x) is x
    assert_result(x, reference(0, (2, 3)), what="input")
    with pytest.raises(ValueError, match="out has shape"):
        tp.all_gather(x, 0, out=arr(np.zeros((4, 3), dtype=np.float32)))


def test_objects_and_dicts_return_their_input(tp: gc.GroupCoordinator) -> None:
    obj = {"a": 1}
    assert tp.broadcast_object(obj) is obj
    objs = [obj]
    assert tp.broadcast_object_list(objs) is objs
    d = {"x": ref(0, (2,)), "y": "z"}
    assert tp.broadcast_tensor_dict(d) is d
    assert tp.send_tensor_dict(d) is d
    assert tp.isend_tensor_dict(d) == []
    assert tp.recv_tensor_dict() is None
    assert tp.irecv_tensor_dict() == (None, [], [])
    assert gc.broadcast_tensor_dict(None) is None


def test_calls_needing_a_communicator_raise(tp: gc.GroupCoordinator) -> None:
    x = ref(0, (4,))
    dtype = np.float32 if IS_NUMPY else flavour_dtype(np.float32)
    for call in (lambda: tp.all_gatherv(x), lambda: tp.reduce_scatterv(x),
                 lambda: tp.send(x), lambda: tp.recv((4,), dtype, **recv_kwargs())):
        with pytest.raises(ValueError, match="No device communicator"):
            call()


def test_moe_without_communicator(tp: gc.GroupCoordinator) -> None:
    h, r = ref(0, (3, 4)), ref(0, (3, 2))
    out = tp.dispatch_router_logits(h, r)
    assert len(out) == 2
    assert_result(out[0], reference(0, (3, 4)))
    assert_result(out[1], reference(0, (3, 2)))
    assert_result(tp.combine(h), reference(0, (3, 4)))


def test_message_queue_without_readers(tp: gc.GroupCoordinator) -> None:
    mq = tp.create_mq_broadcaster()
    assert mq.is_writer and mq.n_reader == 0
    mq.enqueue("nobody reads this")  # a no-op, as in vLLM
