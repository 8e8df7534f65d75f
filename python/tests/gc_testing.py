"""Helpers shared by the test modules (imported as a plain module: pytest puts this folder on
sys.path).

Array flavours. The suite runs with one array library at a time, chosen by the environment
variable ``GROUPCOORD_TEST_ARRAYS``:

==============  ==========================================  =========
flavour         arrays                                      backend
==============  ==========================================  =========
``numpy``       numpy arrays (the default)                  gloo
``torch-cpu``   torch CPU tensors                           gloo
``torch-cuda``  torch tensors on the rank's GPU             nccl
``cupy``        cupy arrays on the rank's GPU               nccl
==============  ==========================================  =========

Tests build their inputs with ``arr(numpy_array)`` (the flavour's array on the rank's device),
read results with ``to_numpy(x)`` and check them with ``assert_result(out, expected)``, which
also checks that the result came back as the caller's type on the caller's device (torch in,
torch out, on CUDA). References stay numpy, computed independently of the code under test.
torch and cupy are imported lazily, only by their flavours, so the numpy flavour never needs
them. In the numpy flavour ``arr`` and ``to_numpy`` return their argument itself, so that run
is exactly the historical numpy suite.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Optional

import numpy as np
import pytest

import groupcoord as gc

# Deadline of every group in the suite (seconds): long enough for an oversubscribed 2-core
# machine, short enough that a mismatch fails fast.
GROUP_TIMEOUT = 30.0

# ---- array flavour ---------------------------------------------------------------------------

FLAVOURS = {"numpy": "gloo", "torch-cpu": "gloo", "torch-cuda": "nccl", "cupy": "nccl"}
FLAVOUR = os.environ.get("GROUPCOORD_TEST_ARRAYS", "numpy")
if FLAVOUR not in FLAVOURS:
    raise ValueError(
        f"GROUPCOORD_TEST_ARRAYS={FLAVOUR!r}: expected one of {', '.join(sorted(FLAVOURS))}")
# The backend of every group the suite creates follows the flavour (the outcome group excepted).
BACKEND = FLAVOURS[FLAVOUR]
ON_CUDA = BACKEND == "nccl"
IS_NUMPY = FLAVOUR == "numpy"

_device: Optional[str] = None  # "cpu" or "cuda:N", set by configure_flavour()


def _torch() -> Any:
    import torch  # only the torch flavours get here

    return torch


def _cupy() -> Any:
    import cupy  # only the cupy flavour gets here

    return cupy


def device() -> str:
    """The device this rank's arrays live on: "cpu", or the rank's GPU as "cuda:N"."""
    assert _device is not None, "configure_flavour() has not run (conftest's session fixture)"
    return _device


def configure_flavour(group: gc.GroupCoordinator) -> None:
    """Called once per session after the groups exist: picks the rank's device from `group`
    (nccl groups know their GPU: local_rank % device_count), makes it current, and points the
    default library of results without an input to mirror (recv, received tensor dicts) at the
    flavour, as an engine of that library would."""
    global _device
    # Host results without an input to mirror: the flavour's library on torch-cpu, numpy on the
    # others (the CPU default would follow torch once any test imported it).
    gc.set_default_array_library("torch" if FLAVOUR == "torch-cpu" else "numpy", device_type="cpu")
    if not ON_CUDA:
        _device = "cpu"
        return
    _device = group.device
    assert _device.startswith("cuda:"), f"an nccl group is on {_device!r}, expected cuda:N"
    index = int(_device.split(":")[1])
    if FLAVOUR == "torch-cuda":
        _torch().cuda.set_device(index)
        gc.set_default_array_library("torch", device_type="cuda")
    else:
        _cupy().cuda.Device(index).use()
        gc.set_default_array_library("cupy", device_type="cuda")


def _cuda_index() -> int:
    return int(device().split(":")[1])


def arr(a: Any, dtype: Optional[str] = None) -> Any:
    """`a` (a numpy array or scalar) as the flavour's array on this rank's device, with its own
    memory (numpy: `a` itself). `dtype` names a dtype numpy lacks ("bfloat16"): torch only."""
    if IS_NUMPY:
        assert dtype is None, f"numpy has no {dtype}"
        return a
    a = np.ascontiguousarray(a)  # torch.from_numpy refuses negative strides
    if FLAVOUR.startswith("torch"):
        torch = _torch()
        t = torch.from_numpy(a.copy())  # a copy: never shares memory with the reference
        if dtype is not None:
            t = t.to(dtype=getattr(torch, dtype))
        return t.to(device()) if ON_CUDA else t
    assert dtype is None, f"cupy has no {dtype}"
    with _cupy().cuda.Device(_cuda_index()):
        return _cupy().asarray(a)


def ref(rank: int, shape, dtype=np.float32) -> Any:
    """arr(reference(rank, shape, dtype)): rank r's input in the flavour."""
    return arr(reference(rank, shape, dtype))


def to_numpy(x: Any) -> np.ndarray:
    """A numpy copy of a flavour array (numpy: `x` itself), for comparisons. bfloat16 and fp8
    have no numpy dtype: they come back as float32 (exact for the suite's small integers)."""
    if isinstance(x, np.ndarray):
        return x
    if FLAVOUR.startswith("torch"):
        torch = _torch()
        if isinstance(x, torch.Tensor):
            x = x.detach()
            narrow = (torch.bfloat16, getattr(torch, "float8_e4m3fn", None),
                      getattr(torch, "float8_e5m2", None))
            if x.dtype in narrow:
                x = x.float()
            return x.cpu().numpy()  # .cpu() waits for the current stream
    if FLAVOUR == "cupy":
        cupy = _cupy()
        if isinstance(x, cupy.ndarray):
            return cupy.asnumpy(x)
    raise AssertionError(f"[{FLAVOUR}] expected an array, got {type(x).__name__}: {x!r}")


def flavour_dtype(dtype: Any) -> Any:
    """The flavour's dtype object for a numpy dtype (or a name such as "float32"/"bfloat16"):
    what a caller of that library passes to recv(size, dtype) and finds in `out.dtype`."""
    if FLAVOUR.startswith("torch"):
        torch = _torch()
        if isinstance(dtype, str) and not hasattr(np, dtype):
            return getattr(torch, dtype)  # bfloat16, float8_*
        return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype
    return np.dtype(dtype)  # numpy and cupy share numpy's dtypes


def assert_flavour(x: Any, what: str = "result") -> None:
    """`x` is an array of the flavour, on this rank's device (the caller's type came back)."""
    if IS_NUMPY:
        assert isinstance(x, np.ndarray), f"{what}: expected numpy.ndarray, got {type(x)}"
        return
    if FLAVOUR.startswith("torch"):
        torch = _torch()
        assert isinstance(x, torch.Tensor), f"{what}: expected torch.Tensor, got {type(x)}"
        assert x.device == torch.device(device()), f"{what}: on {x.device}, expected {device()}"
        return
    cupy = _cupy()
    assert isinstance(x, cupy.ndarray), f"{what}: expected cupy.ndarray, got {type(x)}"
    assert x.device.id == _cuda_index(), f"{what}: on GPU {x.device.id}, expected {device()}"


def assert_result(out: Any, expected: np.ndarray, dtype: Any = None, what: str = "result") -> None:
    """`out` is a flavour array on this rank's device, of `dtype` (numpy dtype or name; default:
    expected's), equal to `expected` (numpy)."""
    assert_flavour(out, what)
    want = flavour_dtype(expected.dtype if dtype is None else dtype)
    assert out.dtype == want, f"{what}: dtype {out.dtype}, expected {want}"
    got = to_numpy(out)
    assert tuple(got.shape) == tuple(expected.shape), (
        f"{what}: shape {got.shape}, expected {expected.shape}")
    np.testing.assert_array_equal(got, expected, err_msg=f"{what} [{FLAVOUR}]")


def recv_kwargs() -> dict:
    """Keywords that make recv() return the flavour (cupy: CUDA results default to torch when
    it is installed, so say so; the others follow the dtype or the defaults set above)."""
    return {"array_library": "cupy"} if FLAVOUR == "cupy" else {}


def requires_flavour(*names: str):
    """Skips a test unless the flavour is one of `names`."""
    return pytest.mark.skipif(FLAVOUR not in names,
                              reason=f"needs GROUPCOORD_TEST_ARRAYS in {names}, have {FLAVOUR}")


requires_numpy_flavour = requires_flavour("numpy")
requires_torch = requires_flavour("torch-cpu", "torch-cuda")
requires_cuda_flavour = requires_flavour("torch-cuda", "cupy")


class DLPackOnly:
    """A producer known only through DLPack (like a foreign array library without from_dlpack):
    wraps any array with __dlpack__ (numpy, torch, cupy) and forwards the consumer's stream."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self) -> Any:
        return self.array.__dlpack_device__()


# ---- worlds and references -------------------------------------------------------------------


def launcher_world_size() -> int:
    """The world size the launcher announces (known before any test runs, for skip marks)."""
    for name in ("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "PMI_SIZE"):
        if name in os.environ:
            return int(os.environ[name])
    return 1


def launcher_rank() -> int:
    """This process's world rank as the launcher announces it (mpirun, torchrun, MPICH)."""
    for name in ("OMPI_COMM_WORLD_RANK", "RANK", "PMI_RANK"):
        if name in os.environ:
            return int(os.environ[name])
    return 0


def launcher_local_rank() -> int:
    """This process's rank on its node as the launcher announces it (the world rank without one)."""
    for name in ("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "MPI_LOCALRANKID"):
        if name in os.environ:
            return int(os.environ[name])
    return launcher_rank()


def launcher_node_count() -> int:
    """How many nodes the launcher's world spans (world size over ranks per node)."""
    for name in ("OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"):
        if name in os.environ:
            return launcher_world_size() // int(os.environ[name])
    return 1


def initialize_whole_world_tp() -> None:
    """The suite's default layout: TP over the whole world, on the flavour's backend."""
    gc.initialize_model_parallel(
        tensor_model_parallel_size=gc.get_world_group().world_size, backend=BACKEND
    )


@contextlib.contextmanager
def model_parallel(**sizes: int) -> Iterator[None]:
    """Re-initialises the model-parallel groups with `sizes` for the block, then restores TP over
    the whole world. Collective."""
    gc.destroy_model_parallel()
    gc.initialize_model_parallel(**sizes, backend=BACKEND)
    try:
        yield
    finally:
        gc.get_world_group().barrier()
        gc.destroy_model_parallel()
        initialize_whole_world_tp()


def requires_world_size(*sizes: int):
    """Skips a test unless the world size is one of `sizes` (the same decision on every rank)."""
    ws = launcher_world_size()
    return pytest.mark.skipif(ws not in sizes, reason=f"needs world size in {sizes}, have {ws}")


def requires_min_world_size(n: int):
    ws = launcher_world_size()
    return pytest.mark.skipif(ws < n, reason=f"needs world size >= {n}, have {ws}")


def reference(rank: int, shape, dtype=np.float32) -> np.ndarray:
    """Rank r's input, which every rank can compute for every other rank: f(r, i) = 3 r + i % 5.
    Small integers: exact in every dtype, and sums over 4 ranks still fit in int8."""
    n = int(np.prod(shape)) if len(shape) else 1
    return (rank * 3 + np.arange(n) % 5).astype(dtype).reshape(shape)


def sends_first(rank_in_group: int) -> bool:
    """Order of a ring exchange (every rank sends to the next and receives from the previous).

    On Gloo (CPU flavours) every rank posts its sends first: isends do not block, which is part
    of what the ring tests. NCCL point-to-point calls are ordered on the rank's stream, so a
    rank's receives would queue behind its own sends while NCCL buffers only a few unreceived
    messages: with every rank sending first the ring could deadlock. On NCCL even ranks send
    first and odd ranks receive first (vLLM's send_recv_test_worker order), which needs an even
    world size or 1 (the suite runs 1, 2 and 4)."""
    return not ON_CUDA or rank_in_group % 2 == 0
