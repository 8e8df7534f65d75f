"""vLLM's ``vllm.distributed.communication_op``: collectives on the tensor-parallel group.

Each helper calls the same method of ``get_tp_group()``; see GroupCoordinator for the details.
"""

from __future__ import annotations

from typing import Any, Optional

from ._groupcoord import get_tp_group, is_initialized


def tensor_model_parallel_all_reduce(input_: Any, *, out: Any = None) -> Any:
    """All-reduce (sum) the input across the TP group; out of place, or into ``out`` (returned;
    beyond vLLM's signature)."""
    return get_tp_group().all_reduce(input_, out=out)


def tensor_model_parallel_all_gather(input_: Any, dim: int = -1, *, out: Any = None) -> Any:
    """All-gather the input across the TP group along ``dim`` (into ``out`` when given)."""
    return get_tp_group().all_gather(input_, dim, out=out)


def tensor_model_parallel_reduce_scatter(input_: Any, dim: int = -1, *, out: Any = None) -> Any:
    """Reduce-scatter the input across the TP group along ``dim`` (into ``out`` when given)."""
    return get_tp_group().reduce_scatter(input_, dim, out=out)


def tensor_model_parallel_gather(input_: Any, dst: int = 0, dim: int = -1) -> Optional[Any]:
    """Gather the input to TP rank ``dst`` along ``dim``; None on the other ranks."""
    return get_tp_group().gather(input_, dst, dim)


def broadcast_tensor_dict(tensor_dict: Optional[dict] = None, src: int = 0) -> Optional[dict]:
    """Broadcast a tensor dict from TP rank ``src``; returns ``tensor_dict`` when there is no
    distributed world (as vLLM does when torch.distributed is not initialized)."""
    if not is_initialized():
        return tensor_dict
    return get_tp_group().broadcast_tensor_dict(tensor_dict, src)


__all__ = [
    "broadcast_tensor_dict",
    "tensor_model_parallel_all_gather",
    "tensor_model_parallel_all_reduce",
    "tensor_model_parallel_gather",
    "tensor_model_parallel_reduce_scatter",
]
