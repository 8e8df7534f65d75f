"""CUDA graphs the way torch engines capture them (the torch-cuda flavour only): a fresh
communicator whose first calls happen inside ``torch.cuda.graph`` (vLLM's own pynccl graph test
makes no call before the capture), every op, replayed many times with the inputs rewritten in
place before each replay and every result checked; results come from torch's graph pool; the
communicator keeps working eagerly and in a second graph afterwards.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import device, requires_flavour

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


def _write_inputs(inputs: Dict[str, Any], rank: int, replay: int) -> None:
    """Rank r holds (r + 1) * replay + i at flat element i of every input (rewritten in place:
    the graph reads these addresses when it runs)."""
    torch = _torch()
    for t in inputs.values():
        values = torch.arange(t.numel(), dtype=torch.float32, device=t.device) + (rank + 1) * replay
        t.copy_(values.view(t.shape))


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

    return {
        "all_reduce": reduced, "all_reduce out=": reduced, "all_gather dim 0": rows,
        "all_gather dim -1": cols, "reduce_scatter": scattered, "all_gatherv": rows,
        "reduce_scatterv": scattered, "broadcast": lambda replay: replay + i,
    }


def _capture_every_op(comm: Any, inputs: Dict[str, Any], out: Any) -> Dict[str, Any]:
    n = comm.world_size
    x, wide = inputs["x"], inputs["wide"]
    return {
        "all_reduce": comm.all_reduce(x),
        "all_reduce out=": comm.all_reduce(x, out=out),
        "all_gather dim 0": comm.all_gather(x, 0),
        "all_gather dim -1": comm.all_gather(x, -1),
        "reduce_scatter": comm.reduce_scatter(wide, 0),
        "all_gatherv": comm.all_gatherv(x, 0, sizes=[ROWS] * n),
        "reduce_scatterv": comm.reduce_scatterv(wide, 0, sizes=[ROWS] * n),
        "broadcast": comm.broadcast(inputs["broadcast"], 0),
    }


def _check(results: Dict[str, Any], expected: Dict[str, Callable[[int], np.ndarray]],
           replay: int) -> None:
    for name, result in results.items():
        got = result.cpu().numpy().reshape(-1)
        want = expected[name](replay)
        assert np.array_equal(got, want), f"{name}, replay {replay}: {got[:8]} != {want[:8]}"


@requires_flavour("torch-cuda")
def test_every_op_of_a_fresh_communicator_is_captured_on_its_first_call(fresh: Any) -> None:
    torch = _torch()
    me, n = fresh.rank_in_group, fresh.world_size
    replays = 1000 if n == 1 else 200  # ranks sharing one GPU time-slice it
    inputs = {
        "x": torch.empty((ROWS, COLS), dtype=torch.float32, device=device()),
        "wide": torch.empty((n * ROWS, COLS), dtype=torch.float32, device=device()),
        "broadcast": torch.empty((ROWS, COLS), dtype=torch.float32, device=device()),
    }
    out = torch.empty((ROWS, COLS), dtype=torch.float32, device=device())
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # global capture mode, on torch's side stream
        results = _capture_every_op(fresh, inputs, out)
    assert results["all_reduce out="] is out
    expected = _expected(n, me)
    for replay in range(1, replays + 1):
        _write_inputs(inputs, me, replay)
        graph.replay()
        torch.cuda.synchronize()
        _check(results, expected, replay)

    # A second graph on the same communicator, then both replayed, then eager calls.
    second = torch.cuda.CUDAGraph()
    with torch.cuda.graph(second):
        again = fresh.all_reduce(inputs["x"])
    _write_inputs(inputs, me, 7)
    second.replay()
    graph.replay()
    torch.cuda.synchronize()
    assert np.array_equal(again.cpu().numpy().reshape(-1), expected["all_reduce"](7))
    _check(results, expected, 7)
    eager = fresh.all_reduce(inputs["x"])
    assert np.array_equal(eager.cpu().numpy().reshape(-1), expected["all_reduce"](7))


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
