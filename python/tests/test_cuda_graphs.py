"""CUDA graphs the way torch and cupy engines capture them (the torch-cuda and cupy flavours): a
fresh communicator whose first calls happen inside ``torch.cuda.graph`` or a cupy stream capture
(vLLM's own pynccl graph test makes no call before the capture), every op (send/recv too, with 2
ranks or more), replayed many times with the inputs rewritten in place before each replay and
every result checked; torch results come from torch's graph pool; the communicator keeps working
eagerly and in a second graph afterwards.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import FLAVOUR, device, requires_flavour, to_numpy

ROWS, COLS = 4, 8
BLOCK = ROWS * COLS


def _torch() -> Any:
    import torch  # the torch-cuda flavour only

    return torch


@pytest.fixture
def fresh() -> Any:
    """A new device communicator over the TP group's ranks: no call has been made on it."""
    comm = gc.get_tp_group().make_sibling_device_group()
    yield comm
    comm.destroy()


def _cupy() -> Any:
    import cupy  # the cupy flavour only

    return cupy


def _empty(shape: Tuple[int, ...]) -> Any:
    """An uninitialised float32 array of the flavour on this rank's GPU."""
    if FLAVOUR == "cupy":
        return _cupy().empty(shape, dtype=np.float32)
    return _torch().empty(shape, dtype=_torch().float32, device=device())


def _synchronize() -> None:
    if FLAVOUR == "cupy":
        _cupy().cuda.Device().synchronize()
    else:
        _torch().cuda.synchronize()


def _write_inputs(inputs: Dict[str, Any], rank: int, replay: int) -> None:
    """Rank r holds (r + 1) * replay + i at flat element i of every input (rewritten in place:
    the graph reads these addresses when it runs)."""
    for t in inputs.values():
        if FLAVOUR == "cupy":
            cupy = _cupy()
            t[...] = (cupy.arange(t.size, dtype=cupy.float32) + (rank + 1) * replay).reshape(t.shape)
        else:
            torch = _torch()
            values = torch.arange(t.numel(), dtype=torch.float32, device=t.device)
            t.copy_((values + (rank + 1) * replay).view(t.shape))


class _Capture:
    """One graph of the flavour: `with capture:` records the calls made inside it (torch: in
    ``torch.cuda.graph``, global mode on torch's side stream; cupy: a non-blocking stream made
    current and captured), `replay()` runs it once and waits for it."""

    def __init__(self) -> None:
        if FLAVOUR == "cupy":
            self._stream = _cupy().cuda.Stream(non_blocking=True)
            self._graph: Any = None
        else:
            self._graph = _torch().cuda.CUDAGraph()
            self._context: Any = None

    def __enter__(self) -> "_Capture":
        if FLAVOUR == "cupy":
            self._stream.__enter__()
            # cupy's pool keeps free blocks per stream and splits them: one freed MiB on this
            # stream serves the results allocated during the capture without a cudaMalloc.
            warm = _cupy().empty(1 << 20, dtype=np.uint8)
            del warm
            self._stream.begin_capture()
        else:
            self._stream_before = _torch().cuda.current_stream()
            self._context = _torch().cuda.graph(self._graph)
            self._context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if FLAVOUR == "cupy":
            try:
                graph = self._stream.end_capture()
            finally:
                self._stream.__exit__(*exc)
            if exc[0] is None:
                self._graph = graph
        else:
            try:
                self._context.__exit__(*exc)
            finally:
                # torch.cuda.graph's exit leaves its capture stream current when capture_end
                # raises (an invalidated capture): every later call would run on that stream.
                _torch().cuda.set_stream(self._stream_before)

    def replay(self) -> None:
        if FLAVOUR == "cupy":
            self._graph.launch(self._stream)
        else:
            self._graph.replay()
        _synchronize()


def _gathered_rows(n: int) -> list:
    """Rows each rank gives the uneven all_gatherv: one fewer on odd ranks."""
    return [ROWS - q % 2 for q in range(n)]


def _scattered_rows(n: int) -> list:
    """Rows each rank gets from the uneven reduce_scatterv: rank 0 one more, rank 1 one fewer."""
    return [ROWS + (1 if q == 0 else -1 if q == 1 else 0) if n > 1 else ROWS for q in range(n)]


def _capture_all_reduce(comm: Any, x: Any) -> Tuple["_Capture", Any]:
    """A new graph holding one all_reduce of `x`, and its result."""
    graph = _Capture()
    with graph:
        result = comm.all_reduce(x)
    return graph, result


def _expected(n: int, rank: int) -> Dict[str, Callable[[int], np.ndarray]]:
    """What each captured op's result holds after replay `replay` (flat)."""
    s = n * (n + 1) / 2  # sum of (q + 1) over the ranks
    i = np.arange(BLOCK, dtype=np.float64)
    gathered = np.arange(n * BLOCK)

    def reduced(replay: int) -> np.ndarray:
        return replay * s + n * i

    def rows(replay: int) -> np.ndarray:  # along dim 0: block q is rank q's input
        return (gathered // BLOCK + 1) * replay + gathered % BLOCK

    def cols(replay: int) -> np.ndarray:  # along dim -1: each row holds every rank's row
        row, rest = gathered // (n * COLS), gathered % (n * COLS)
        return (rest // COLS + 1) * replay + row * COLS + rest % COLS

    def scattered(replay: int) -> np.ndarray:
        return replay * s + n * (rank * BLOCK + i)

    def gathered_unevenly(replay: int) -> np.ndarray:
        return np.concatenate([(q + 1) * replay + np.arange(rows * COLS)
                               for q, rows in enumerate(_gathered_rows(n))])

    def scattered_unevenly(replay: int) -> np.ndarray:
        rows = _scattered_rows(n)
        first = sum(rows[:rank]) * COLS
        return replay * s + n * (first + np.arange(rows[rank] * COLS))

    return {
        "all_reduce": reduced, "all_reduce out=": reduced, "all_gather dim 0": rows,
        "all_gather dim -1": cols, "reduce_scatter": scattered, "all_gatherv": rows,
        "reduce_scatterv": scattered, "broadcast": lambda replay: replay + i,
        "all_gatherv list": rows, "all_gatherv uneven": gathered_unevenly,
        "reduce_scatterv uneven": scattered_unevenly,
        "recv": lambda replay: ((rank - 1) % n + 1) * replay + i,
    }


def _capture_every_op(comm: Any, inputs: Dict[str, Any], out: Any) -> Dict[str, Any]:
    n, me = comm.world_size, comm.rank_in_group
    x, wide = inputs["x"], inputs["wide"]
    received: Dict[str, Any] = {}
    if n > 1:  # a ring, rank 0 sending first so that two blocking calls never face each other
        after, before = (me + 1) % n, (me - 1) % n
        if me == 0:
            comm.send(x, after)
            received["recv"] = comm.recv((ROWS, COLS), x.dtype, before)
        else:
            received["recv"] = comm.recv((ROWS, COLS), x.dtype, before)
            comm.send(x, after)
    return {**received,
        "all_reduce": comm.all_reduce(x),
        "all_reduce out=": comm.all_reduce(x, out=out),
        "all_gather dim 0": comm.all_gather(x, 0),
        "all_gather dim -1": comm.all_gather(x, -1),
        "reduce_scatter": comm.reduce_scatter(wide, 0),
        "all_gatherv": comm.all_gatherv(x, 0, sizes=[ROWS] * n),
        "reduce_scatterv": comm.reduce_scatterv(wide, 0, sizes=[ROWS] * n),
        # Results the C++ library allocates (framework_allocator.h): from 2 ranks on, uneven
        # sizes take the v-variants' own path; a list always does.
        "all_gatherv list": comm.all_gatherv([x], 0)[0],
        "all_gatherv uneven": comm.all_gatherv(x[: _gathered_rows(n)[me]], 0,
                                               sizes=_gathered_rows(n)),
        "reduce_scatterv uneven": comm.reduce_scatterv(wide, 0, sizes=_scattered_rows(n)),
        "broadcast": comm.broadcast(inputs["broadcast"], 0),
    }


def _check(results: Dict[str, Any], expected: Dict[str, Callable[[int], np.ndarray]],
           replay: int) -> None:
    for name, result in results.items():
        got = to_numpy(result).reshape(-1)
        want = expected[name](replay)
        assert np.array_equal(got, want), f"{name}, replay {replay}: {got[:8]} != {want[:8]}"


@requires_flavour("torch-cuda", "cupy")
def test_every_op_of_a_fresh_communicator_is_captured_on_its_first_call(fresh: Any) -> None:
    me, n = fresh.rank_in_group, fresh.world_size
    # More than 2 ranks time-slice the one GPU of the test host: each replay then takes
    # milliseconds per collective, so fewer replays keep the run within its deadline.
    replays = 1000 if n <= 2 else 100
    inputs = {"x": _empty((ROWS, COLS)), "wide": _empty((n * ROWS, COLS)),
              "broadcast": _empty((ROWS, COLS))}
    out = _empty((ROWS, COLS))
    _synchronize()
    graph = _Capture()
    with graph:
        results = _capture_every_op(fresh, inputs, out)
    assert results["all_reduce out="] is out
    expected = _expected(n, me)
    for replay in range(1, replays + 1):
        _write_inputs(inputs, me, replay)
        _synchronize()
        graph.replay()
        _check(results, expected, replay)

    # A second graph on the same communicator, then both replayed, then eager calls.
    second, again = _capture_all_reduce(fresh, inputs["x"])
    _write_inputs(inputs, me, 7)
    _synchronize()
    second.replay()
    graph.replay()
    assert np.array_equal(to_numpy(again).reshape(-1), expected["all_reduce"](7))
    _check(results, expected, 7)
    eager = fresh.all_reduce(inputs["x"])
    assert np.array_equal(to_numpy(eager).reshape(-1), expected["all_reduce"](7))


@requires_flavour("torch-cuda")
def test_graph_results_come_from_torchs_graph_pool(fresh: Any) -> None:
    """A result allocated inside the capture is a torch tensor from the graph's private pool: it
    keeps its address across replays and holds each replay's result."""
    torch = _torch()
    x = torch.ones((1024,), dtype=torch.float32, device=device())
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = fresh.all_reduce(x)
    assert isinstance(y, torch.Tensor) and y.is_cuda
    address = y.data_ptr()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert y.data_ptr() == address
    assert torch.equal(y, torch.full_like(x, float(fresh.world_size)))


@requires_flavour("torch-cuda", "cupy")
def test_a_failed_capture_leaves_the_communicator_usable(fresh: Any) -> None:
    """A capture the caller's own mistake invalidates (a host synchronisation inside it) leaves
    the communicator working for eager calls and for a new capture."""
    me, n = fresh.rank_in_group, fresh.world_size
    inputs = {"x": _empty((ROWS, COLS))}
    _write_inputs(inputs, me, 1)
    _synchronize()
    expected = _expected(n, me)["all_reduce"]
    broken = _Capture()
    with pytest.raises(Exception):
        with broken:
            fresh.all_reduce(inputs["x"])
            _synchronize()  # illegal while capturing: invalidates the capture
    eager = fresh.all_reduce(inputs["x"])
    assert np.array_equal(to_numpy(eager).reshape(-1), expected(1)), "eager after the failure"
    graph, captured = _capture_all_reduce(fresh, inputs["x"])
    _write_inputs(inputs, me, 3)
    _synchronize()
    graph.replay()
    assert np.array_equal(to_numpy(captured).reshape(-1), expected(3)), "a new capture"
