"""CUDA results from Python (the GPU flavours only; skipped elsewhere): torch and cupy results are
allocated by torch's caching allocator / cupy's memory pool, no tensor call waits on the host for
the GPU, an explicit ``stream=`` waits for the caller's current stream, and
``groupcoord.Tensor.__dlpack__`` takes the DLPack stream numbers.

"No host synchronisation" is checked by enqueueing a long ``torch.cuda._sleep`` on the current
stream first: the call must come back while that stream is still busy. At world size 1 the
coordinator bypasses its collectives (vLLM), so the calls go to a sibling device communicator of
the TP group (NCCL with one rank) instead.
"""

from __future__ import annotations

import contextlib
import gc as python_gc
import time
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import FLAVOUR, DLPackOnly, device, requires_flavour

requires_torch_cuda = requires_flavour("torch-cuda")

MIB = 1 << 20
# Cycles of torch.cuda._sleep: about a quarter of a second on an H200 (1.98 GHz), far longer
# than any host call, far shorter than the suite's deadlines.
SLEEP_CYCLES = 500_000_000


@contextlib.contextmanager
def python_gc_paused() -> Iterator[None]:
    """No collection pass of Python's own inside a timed window (one can take longer than the
    GPU's sleep on a loaded host, which would look like a host wait of ours)."""
    was_enabled = python_gc.isenabled()
    python_gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            python_gc.enable()


@pytest.fixture(autouse=True)
def torch_default_stream_current() -> Iterator[None]:
    """Every test starts and ends on torch's default stream: the sleeps below are enqueued on the
    current stream and the checks query it, so a stream left current by an earlier test (of any
    file) would make them query the wrong one."""
    if FLAVOUR != "torch-cuda":
        yield
        return
    torch = _torch()
    default = torch.cuda.default_stream()
    current = torch.cuda.current_stream()
    assert current == default, f"an earlier test left torch's current stream at {current}"
    yield
    current = torch.cuda.current_stream()
    torch.cuda.set_stream(default)
    assert current == default, f"this test left torch's current stream at {current}"


@pytest.fixture(scope="module")
def target() -> Iterator[Any]:
    """What the calls run on: the TP group, or at world size 1 a sibling communicator."""
    tp = gc.get_tp_group()
    if tp.world_size > 1:
        yield tp
        return
    comm = tp.make_sibling_device_group()
    yield comm
    comm.destroy()


def _torch() -> Any:
    import torch  # the torch-cuda flavour only

    return torch


def full(value: float, n: int) -> Any:
    """n float32 copies of `value` on this rank's GPU (torch)."""
    torch = _torch()
    return torch.full((n,), float(value), dtype=torch.float32, device=device())


def rank_sum(target: Any) -> float:
    """Sum over the ranks of (rank + 1): every rank's input value below."""
    return float(sum(r + 1 for r in range(target.world_size)))


# ---- torch: results from torch's allocator ----------------------------------------------------

@requires_torch_cuda
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "all_gatherv",
                                "reduce_scatterv"])
def test_results_are_allocated_by_torch(target: Any, op: str) -> None:
    """An 8 MiB result counts in torch.cuda.memory_allocated() while it is held. The v-variants
    with uniform sizes (a list of equal sizes) are the plain calls, allocated by torch too."""
    torch = _torch()
    ws, me = target.world_size, target.rank_in_group
    n = 8 * MIB // 4  # float32 elements of 8 MiB
    if op.startswith("all_gather"):
        x = full(me + 1, n // ws)
    elif op.startswith("reduce_scatter"):
        x = full(me + 1, n * ws)
    else:
        x = full(me + 1, n)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    if op == "all_reduce":
        y = target.all_reduce(x)
    elif op.endswith("v"):
        y = getattr(target, op)(x, 0, [n // ws if op == "all_gatherv" else n] * ws)
    else:
        y = getattr(target, op)(x, 0)
    grown = torch.cuda.memory_allocated() - before
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype
    assert grown >= y.numel() * y.element_size(), (grown, y.numel() * y.element_size())
    op = op.rstrip("v")
    if op == "all_gather":
        expected = torch.cat([full(r + 1, n // ws) for r in range(ws)])
    else:
        expected = full(rank_sum(target), n)[: y.numel()]
    assert torch.equal(y, expected)


@requires_torch_cuda
@pytest.mark.parametrize("op", ["all_gatherv list", "all_gatherv uneven", "reduce_scatterv uneven",
                                "gather", "recv"])
def test_results_the_library_allocates_come_from_torch_too(target: Any, op: str) -> None:
    """The calls whose result the C++ library allocates (lists, uneven sizes, gather) take it
    from torch's allocator while they run on torch tensors (framework_allocator.h), and recv's
    result is a torch tensor received into: it counts in torch.cuda.memory_allocated() while
    held, and goes back when dropped."""
    torch = _torch()
    ws, me = target.world_size, target.rank_in_group
    if op == "recv" and ws == 1:
        pytest.skip("recv needs a peer")
    n = 8 * MIB // 4
    rows = n // ws
    # Uneven from 2 ranks on: rank 0 one more than its share, rank 1 one fewer.
    sizes = [rows + (1 if q == 0 else -1 if q == 1 else 0) if ws > 1 else rows for q in range(ws)]
    inputs = {"all_gatherv list": full(me + 1, rows), "all_gatherv uneven": full(me + 1, sizes[me]),
              "reduce_scatterv uneven": full(me + 1, n), "gather": full(me + 1, rows),
              "recv": full(me + 1, rows)}
    x = inputs[op]
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    if op == "all_gatherv list":
        (y,) = target.all_gatherv([x], 0)
        expected = torch.cat([full(r + 1, rows) for r in range(ws)])
    elif op == "all_gatherv uneven":
        y = target.all_gatherv(x, 0, sizes)
        expected = torch.cat([full(r + 1, sizes[r]) for r in range(ws)])
    elif op == "reduce_scatterv uneven":
        y = target.reduce_scatterv(x, 0, sizes)
        expected = full(rank_sum(target), sizes[me])
    elif op == "gather":
        y = target.gather(x, 0)
        expected = torch.cat([full(r + 1, rows) for r in range(ws)]) if me == 0 else None
    else:  # a ring; rank 0 sends first so that no two blocking calls face each other
        after, before_rank = (me + 1) % ws, (me - 1) % ws
        if me == 0:
            target.send(x, after)
            y = target.recv((rows,), torch.float32, before_rank)
        else:
            y = target.recv((rows,), torch.float32, before_rank)
            target.send(x, after)
        expected = full(before_rank + 1, rows)
    grown = torch.cuda.memory_allocated() - before
    if expected is None:  # gather's non-destination ranks get nothing
        assert y is None
        return
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype
    assert grown >= y.numel() * y.element_size(), (op, grown, y.numel() * y.element_size())
    assert torch.equal(y, expected), op
    held = torch.cuda.memory_allocated()
    del y
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() <= held - rows * 4, op


@requires_torch_cuda
def test_recv_on_an_explicit_stream_orders_the_current_stream_after_it(target: Any) -> None:
    """recv(stream=side): the result is torch's, and torch's current stream reads it only after
    the receive on `side` (an event on the GPU), even behind a long sleep on `side`."""
    torch = _torch()
    ws, me = target.world_size, target.rank_in_group
    if ws == 1:
        pytest.skip("recv needs a peer")
    n = 1 << 16
    after, before_rank = (me + 1) % ws, (me - 1) % ws
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES // 5)  # the receive lands late on `side`
    if me == 0:
        target.send(full(me + 1, n), after)
        y = target.recv((n,), torch.float32, before_rank, stream=side)
    else:
        y = target.recv((n,), torch.float32, before_rank, stream=side)
        target.send(full(me + 1, n), after)
    copy = y * 1  # on the current stream
    torch.cuda.synchronize()
    assert isinstance(y, torch.Tensor) and torch.equal(copy, full(before_rank + 1, n))


# ---- no host synchronisation -----------------------------------------------------------------

def no_sync_calls(target: Any) -> dict[str, Callable[[Any], Any]]:
    torch = _torch()
    return {
        "all_reduce": lambda x: target.all_reduce(x),
        "all_reduce out=": lambda x: target.all_reduce(x, out=torch.empty_like(x)),
        "all_reduce in place": lambda x: target.all_reduce(x, out=x),
        "all_gather": lambda x: target.all_gather(x, 0),
        "reduce_scatter": lambda x: target.reduce_scatter(x, 0),
        "all_gatherv": lambda x: target.all_gatherv(x, 0),  # uniform: all_gather's out= path
        "reduce_scatterv": lambda x: target.reduce_scatterv(x, 0),
        "all_gatherv list": lambda x: target.all_gatherv([x], 0),  # exported through DLPack
        "broadcast": lambda x: target.broadcast(x, 0),
    }


@requires_torch_cuda
@pytest.mark.parametrize("name", ["all_reduce", "all_reduce out=", "all_reduce in place",
                                  "all_gather", "reduce_scatter", "all_gatherv",
                                  "all_gatherv list", "reduce_scatterv", "broadcast"])
def test_no_host_synchronisation(target: Any, name: str) -> None:
    torch = _torch()
    call = no_sync_calls(target)[name]
    x = full(1.0, 1024 * target.world_size)
    call(x)  # warm-up: connections, the allocator's first blocks
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    with python_gc_paused():
        start = time.perf_counter()
        call(x)
        still_busy = not torch.cuda.current_stream().query()
        took = time.perf_counter() - start
    torch.cuda.synchronize()
    assert still_busy, f"{name} waited on the host for the GPU (the call took {took * 1e3:.1f} ms)"


@requires_torch_cuda
def test_explicit_stream_waits_for_the_current_stream(target: Any) -> None:
    """An input made on the current stream, used by a call on stream=side: the side stream waits
    for it (an event), so the late fill is what gets reduced."""
    torch = _torch()
    me, n = target.rank_in_group, 4096
    x = torch.zeros(n, dtype=torch.float32, device=device())
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    x.fill_(me + 1)  # behind the sleep on the current stream
    side = torch.cuda.Stream()
    y = target.all_reduce(x, stream=side)
    side.synchronize()
    torch.cuda.synchronize()
    assert torch.equal(y, full(rank_sum(target), n))


# ---- groupcoord.Tensor.__dlpack__ stream numbers ---------------------------------------------

@pytest.fixture
def raw_cuda_results() -> Iterator[None]:
    """Results without a library to mirror come back as groupcoord.Tensor for the test."""
    gc.set_default_array_library("dlpack", device_type="cuda")
    yield
    gc.set_default_array_library("torch", device_type="cuda")


@requires_torch_cuda
def test_dlpack_stream_numbers(target: Any, raw_cuda_results: None) -> None:
    torch = _torch()
    me, n = target.rank_in_group, 256
    t = target.all_reduce(DLPackOnly(full(me + 1, n)))
    assert isinstance(t, gc.Tensor) and t.device == device()
    side = torch.cuda.Stream()
    for stream in (None, 1, 2, side.cuda_stream, -1):  # legacy, legacy, per-thread, handle, none
        assert t.__dlpack__(stream=stream) is not None, stream
    with pytest.raises(ValueError, match="0 is ambiguous"):
        t.__dlpack__(stream=0)
    torch.cuda.synchronize()
    assert torch.equal(torch.from_dlpack(t), full(rank_sum(target), n))


@requires_torch_cuda
@pytest.mark.parametrize("consumer", ["default", "side"])
def test_dlpack_export_orders_without_host_wait(target: Any, raw_cuda_results: None,
                                                consumer: str) -> None:
    """A result consumed on torch's default stream (torch passes 1, its handle is 0: the same
    stream) or on a side stream (an event) is ordered on the GPU, not by a host wait."""
    torch = _torch()
    me, n = target.rank_in_group, 256
    x = full(me + 1, n)
    stream = torch.cuda.Stream() if consumer == "side" else torch.cuda.default_stream()
    # Warm-up of every step, the consumer's kernel included: the first launch of a kernel may load
    # its module, which synchronises the device (CUDA's lazy loading), and would look like a host
    # wait of ours.
    with torch.cuda.stream(stream):
        torch.from_dlpack(target.all_reduce(DLPackOnly(x))) * 1
    torch.cuda.synchronize()
    sleeper = torch.cuda.current_stream()
    # The sleep's length on the GPU, for the message: a sleep that ended early (the GPU idle for a
    # reason of its own) reads differently from a host wait that outlasted it.
    sleep_began, sleep_ended = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    sleep_began.record(sleeper)
    torch.cuda._sleep(SLEEP_CYCLES)
    sleep_ended.record(sleeper)
    busy = lambda: not sleeper.query()  # noqa: E731
    assert busy(), f"the sleep did not keep {sleeper} busy"
    # Each step is checked on its own, so that a failure says which one waited on the host, and
    # timed, so that it says how long the host took (a host wait lasts the rest of the sleep).
    steps: dict[str, tuple[bool, float]] = {}
    clock = time.perf_counter
    with python_gc_paused():
        start = clock()
        t = target.all_reduce(DLPackOnly(x))
        steps["all_reduce"] = (busy(), clock() - start)
        with torch.cuda.stream(stream):
            imported = torch.from_dlpack(t)  # on `stream`, after the result
            steps["from_dlpack"] = (busy(), clock() - start)
            y = imported * 1
        steps["consumer's kernel"] = (busy(), clock() - start)
    torch.cuda.synchronize()
    waited = [f"{name} (host at {at * 1e3:.1f} ms)" for name, (still_busy, at) in steps.items()
              if not still_busy]
    slept = sleep_began.elapsed_time(sleep_ended)
    assert not waited, (f"the GPU was idle after: {waited} (a host wait in the first of them); "
                        f"the sleep lasted {slept:.1f} ms on the GPU")
    assert torch.equal(y, full(rank_sum(target), n))


# ---- cupy: results from cupy's pool ----------------------------------------------------------

@requires_flavour("cupy")
def test_cupy_results_come_from_cupys_pool(target: Any) -> None:
    import cupy

    me, n = target.rank_in_group, 8 * MIB // 4
    pool = cupy.get_default_memory_pool()
    x = cupy.full((n,), me + 1, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    before = pool.used_bytes()
    y = target.all_reduce(x)
    assert isinstance(y, cupy.ndarray) and y.device.id == x.device.id
    assert pool.used_bytes() - before >= y.nbytes
    np.testing.assert_array_equal(cupy.asnumpy(y), np.full(n, rank_sum(target), np.float32))
    out = cupy.empty_like(x)
    assert target.all_reduce(x, out=out) is out

