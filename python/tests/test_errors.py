"""Bad input raises ValueError on every rank before anything is sent (so the ranks stay in step);
dead groups raise DistributedError; expired deadlines raise DistributedTimeoutError. Arrays are
the flavour's (gc_testing.py) except where the case is numpy's own (read-only flags, negative
strides): those stay numpy in every flavour, and then exercise the host path of the flavour's
groups."""

from __future__ import annotations

import datetime

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import (
    BACKEND,
    IS_NUMPY,
    _torch,
    arr,
    assert_result,
    ref,
    reference,
    requires_flavour,
    requires_min_world_size,
)


def test_exception_hierarchy() -> None:
    assert issubclass(gc.DistributedError, RuntimeError)
    assert issubclass(gc.DistributedTimeoutError, TimeoutError)
    assert issubclass(gc.DistributedTimeoutError, gc.DistributedError)
    assert issubclass(gc.SourceFailedError, gc.DistributedError)
    assert not issubclass(gc.SourceFailedError, TimeoutError)


@pytest.mark.parametrize("bad", [[1.0, 2.0], "abc", 3, None])
def test_non_array_input(tp: gc.GroupCoordinator, bad) -> None:
    with pytest.raises(ValueError, match="must be an array"):
        tp.all_reduce(bad)


def test_unsupported_dtype(tp: gc.GroupCoordinator) -> None:
    if tp.world_size > 1:  # world size 1 returns the input unexamined, as vLLM
        if IS_NUMPY:
            with pytest.raises(ValueError, match="unsupported dtype"):
                tp.all_reduce(np.zeros(3, dtype=np.uint16))
        else:  # complex: every library exports it through DLPack, groupcoord has no such dtype
            with pytest.raises(ValueError, match="unsupported DLPack type"):
                tp.all_reduce(arr(np.zeros(3, dtype=np.complex64)))
    with pytest.raises(ValueError):
        tp.recv((3,), "float128")


def test_read_only_input_is_fine_unless_written(tp: gc.GroupCoordinator) -> None:
    x = reference(tp.rank_in_group, (4,))
    x.flags.writeable = False
    expected = sum(reference(r, (4,)) for r in range(tp.world_size))
    np.testing.assert_array_equal(tp.all_reduce(x), expected)
    if tp.world_size > 1:
        with pytest.raises(ValueError, match="read-only"):
            tp.broadcast(x, src=0)


@requires_min_world_size(2)
def test_negative_strides(tp: gc.GroupCoordinator) -> None:
    x = reference(tp.rank_in_group, (6,))[::-1]  # read: copied
    expected = sum(reference(r, (6,)) for r in range(tp.world_size))[::-1]
    np.testing.assert_array_equal(tp.all_reduce(x), expected)
    with pytest.raises(ValueError, match="negative strides"):
        tp.broadcast(reference(0, (6,))[::-1], src=0)


@requires_min_world_size(2)
def test_bad_ranks_and_dims(tp: gc.GroupCoordinator) -> None:
    x = ref(tp.rank_in_group, (2, 3))
    with pytest.raises(ValueError):
        tp.all_gather(x, dim=2)
    with pytest.raises(ValueError):
        tp.all_gather(x, dim=-3)
    with pytest.raises(ValueError):
        tp.broadcast(x, src=tp.world_size)
    with pytest.raises(ValueError):
        tp.gather(x, dst=-1)
    with pytest.raises(ValueError):
        tp.send_object("x", dst=tp.rank_in_group)
    with pytest.raises(ValueError):
        tp.recv_object(src=tp.world_size)


# The hot tensor methods (vectorcall methods, not pybind11 functions): vLLM's parameter names,
# order and defaults, stream keyword-only.
HOT_SIGNATURES = {
    "all_reduce": "(self, /, input_, out=None, *, stream=None)",
    "all_gather": "(self, /, input_, dim=-1, out=None, *, stream=None)",
    "all_gatherv": "(self, /, input_, dim=0, sizes=None, *, stream=None)",
    "reduce_scatter": "(self, /, input_, dim=-1, out=None, *, stream=None)",
    "reduce_scatterv": "(self, /, input_, dim=-1, sizes=None, *, stream=None)",
    "broadcast": "(self, /, input_, src=0, *, stream=None)",
}


def test_hot_method_signatures() -> None:
    import inspect

    for cls in (gc.GroupCoordinator, gc.DeviceCommunicator):
        for name, expected in HOT_SIGNATURES.items():
            if cls is gc.DeviceCommunicator and name == "broadcast":
                expected = expected.replace("input_", "tensor")
            method = getattr(cls, name)
            assert str(inspect.signature(method)) == expected, (cls, name)
            assert method.__doc__, (cls, name)


def test_bad_call_arguments_raise_type_error(tp: gc.GroupCoordinator) -> None:
    """Raised before anything is sent, on every rank; the group stays usable."""
    x = ref(tp.rank_in_group, (2, 2))
    calls = {
        "dim str": lambda: tp.all_gather(x, dim="0"),
        "dim float": lambda: tp.reduce_scatter(x, 1.0),
        "src None": lambda: tp.broadcast(x, src=None),
        "unknown keyword": lambda: tp.all_reduce(x, outt=x),
        "missing input": lambda: tp.all_gatherv(),
        "too many positional": lambda: tp.all_gather(x, 0, None, None),
        "stream positional": lambda: tp.all_reduce(x, None, None),
        "twice": lambda: tp.reduce_scatterv(x, 0, dim=0),
    }
    for what, call in calls.items():
        with pytest.raises(TypeError):
            call()
            pytest.fail(what)
    out = tp.all_gather(input_=x, dim=0, out=None, stream=None)
    assert_result(out, np.concatenate([reference(r, (2, 2)) for r in range(tp.world_size)], 0))


@requires_min_world_size(2)
def test_bad_tensor_dicts(tp: gc.GroupCoordinator) -> None:
    """The sender raises ValueError; its receiver (the next rank) is told each of them, so every
    rank sends to the next and receives from the previous."""
    bad = {
        "dictionary": lambda: tp.send_tensor_dict([("a", 1)]),
        "keys must be str": lambda: tp.send_tensor_dict({1: ref(0, (2,))}),
    }
    for error, send in bad.items():
        with pytest.raises(ValueError, match=error):
            send()
        with pytest.raises(gc.SourceFailedError, match=f"failed instead of sending.*{error}"):
            tp.recv_tensor_dict()
    tp.barrier()


def test_bad_timeouts() -> None:
    with pytest.raises(ValueError):
        gc.init_distributed_environment(timeout="soon")
    with pytest.raises(ValueError):
        gc.init_distributed_environment(timeout=-1)


def test_initialize_twice_and_mismatch(world_size: int) -> None:
    with pytest.raises(ValueError):
        gc.initialize_model_parallel(tensor_model_parallel_size=world_size)
    with pytest.raises(ValueError):
        gc.ensure_model_parallel_initialized(world_size + 1, 1)
    gc.ensure_model_parallel_initialized(world_size, 1, backend=BACKEND)  # matches: no-op


def test_destroyed_group_raises(world: gc.GroupCoordinator) -> None:
    g = gc.GroupCoordinator([list(range(world.world_size))], world.local_rank, BACKEND, True,
                            group_name="doomed")
    g.destroy()
    g.destroy()  # idempotent
    with pytest.raises(gc.DistributedError):
        g.barrier()
    if world.world_size > 1:  # world size 1 bypasses without touching the group, as vLLM
        with pytest.raises(gc.DistributedError):
            g.all_reduce(ref(0, (2,)))


@requires_min_world_size(2)
def test_timeout(world: gc.GroupCoordinator) -> None:
    """Rank 0 waits for an object rank 1 never sends: DistributedTimeoutError after the group's
    deadline (a timedelta here), which is both a TimeoutError and a DistributedError."""
    g = gc.GroupCoordinator([list(range(world.world_size))], world.local_rank, "gloo", True,
                            group_name="short", timeout=datetime.timedelta(seconds=1))
    if g.rank_in_group == 0:
        with pytest.raises(TimeoutError) as info:
            g.recv_object(src=1)
        assert isinstance(info.value, gc.DistributedError)
    world.barrier()
    g.destroy()


@requires_flavour("torch-cpu", "torch-cuda")
@requires_min_world_size(2)
def test_torch_negative_view_is_refused(tp: gc.GroupCoordinator) -> None:
    """A tensor with torch's negative bit (a lazily negated view such as ``.conj().imag``) holds
    its values un-negated in memory: sending that memory would send the wrong sign, so it is
    refused, as input and as a target, on every rank before anything is sent."""
    torch = _torch()
    plain = arr(reference(tp.rank_in_group, (2, 3)))
    negative = torch.complex(plain, plain).conj().imag
    assert negative.is_neg()
    with pytest.raises(ValueError, match="negative bit"):
        tp.all_reduce(negative)
    with pytest.raises(ValueError, match="negative bit"):
        tp.all_reduce(plain, out=negative)
    with pytest.raises(ValueError, match="negative bit"):
        tp.broadcast(negative, src=0)
    # Resolved, it is an ordinary tensor, and the group is still in step.
    assert_result(tp.all_reduce(negative.resolve_neg()),
                  -sum(reference(r, (2, 3)) for r in range(tp.world_size)))


@requires_flavour("torch-cpu", "torch-cuda")
@pytest.mark.parametrize("member", ["is_contiguous", "shape"])
def test_torch_reads_follow_a_member_patched_onto_the_tensor_class(
        tp: gc.GroupCoordinator, member: str) -> None:
    """The fast path finds torch.Tensor's members once per version of the class
    (python/src/type_member.h). A member patched onto the class later (a method, or a property:
    a data descriptor) is what it then reads, for the input and for ``out``, and the original
    again once the patch is undone: a cache that ignored the class's version would keep reading
    the original."""
    torch = _torch()
    x = arr(reference(tp.rank_in_group, (2, 3)))
    out = torch.empty_like(x)
    expected = sum(reference(r, (2, 3)) for r in range(tp.world_size))
    tp.all_reduce(x, out=out)  # the members are looked up (and cached) here
    own = vars(torch.Tensor).get(member)
    original = getattr(torch.Tensor, member)
    calls = []
    if member == "shape":
        def read(self):
            calls.append(self)
            return original.__get__(self)
        patch = property(read)
    else:
        def patch(self, *args, **kwargs):
            calls.append(self)
            return original(self, *args, **kwargs)
    setattr(torch.Tensor, member, patch)
    try:
        assert_result(tp.all_reduce(x, out=out), expected)
    finally:
        if own is not None:
            setattr(torch.Tensor, member, own)
        else:
            delattr(torch.Tensor, member)
    assert any(t is x for t in calls) and any(t is out for t in calls), (
        f"the patched {member} was read on {len(calls)} tensors, not on the input and out")
    calls.clear()
    assert_result(tp.all_reduce(x, out=out), expected)
    assert not calls, "the patch, undone, was still read"
