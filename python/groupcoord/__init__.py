"""groupcoord: vLLM's ``GroupCoordinator`` and ``parallel_state`` without PyTorch.

The same functions, classes, method names, keyword names and defaults as
``vllm.distributed.parallel_state`` (plus vLLM's ``communication_op`` helpers), over a C++ core
(Gloo on CPU, NCCL on CUDA). Tensors are any arrays with ``__dlpack__`` -- numpy, torch, cupy --
on CPU or CUDA, passed without copies; results come back as the caller's type (numpy in, numpy
out). Objects are anything picklable. Typical use, under ``mpirun -np 4 python3 script.py``::

    import numpy as np
    import groupcoord as gc

    gc.init_distributed_environment()          # env://: mpirun, torchrun, srun all work
    gc.initialize_model_parallel(tensor_model_parallel_size=2)
    tp = gc.get_tp_group()
    total = tp.all_reduce(np.ones(4, dtype=np.float32))
    gc.destroy_distributed_environment()

Errors: bad arguments raise ``ValueError``; an expired deadline raises
``DistributedTimeoutError`` (a ``TimeoutError`` and a ``DistributedError``); a dead or
misbehaving peer raises ``DistributedError`` (a ``RuntimeError``). Every blocking call releases
the GIL, and Ctrl-C interrupts it on the main thread (see ``set_interruptible``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, Optional

from . import _groupcoord  # noqa: F401  (private hooks live in groupcoord._groupcoord)
from ._groupcoord import (
    DeviceCommunicator,
    DistributedError,
    DistributedTimeoutError,
    GroupCoordinator,
    Handle,
    MessageQueue,
    MessageQueueHandle,
    ModelParallelShrink,
    RankFailureError,
    SourceFailedError,
    SymmetricMemoryStats,
    ProcessGroup,
    Tensor,
    WorldShrink,
    __version__,
    destroy_distributed_environment,
    destroy_model_parallel,
    ensure_model_parallel_initialized,
    find_dead_ranks,
    get_decode_context_model_parallel_rank,
    get_decode_context_model_parallel_world_size,
    get_default_array_library,
    get_dcp_group,
    get_dp_group,
    get_ep_group,
    get_node_count,
    get_pcp_group,
    get_pipeline_model_parallel_group,
    get_pp_group,
    get_rank_failure_policy,
    get_tensor_model_parallel_group,
    get_tensor_model_parallel_rank,
    get_tensor_model_parallel_world_size,
    get_tp_group,
    get_world_group,
    in_the_same_node_as,
    init_distributed_environment,
    initialize_model_parallel,
    is_initialized,
    are_collectives_interruptible,
    is_interruptible,
    model_parallel_is_initialized,
    set_default_array_library,
    set_interruptible,
    set_rank_failure_policy,
    shrink_model_parallel,
    shrink_world,
)
from .communication_op import (
    broadcast_tensor_dict,
    tensor_model_parallel_all_gather,
    tensor_model_parallel_all_reduce,
    tensor_model_parallel_gather,
    tensor_model_parallel_reduce_scatter,
)


@dataclasses.dataclass
class GraphCaptureContext:
    """vLLM's GraphCaptureContext: the stream a CUDA graph is captured on.

    ``stream`` is a ``torch.cuda.Stream`` when capturing with torch on CUDA, None on CPU.
    """

    stream: Any = None


def _is_cuda(group: GroupCoordinator) -> bool:
    return group.device.startswith("cuda")


@contextlib.contextmanager
def _group_graph_capture(
    self: GroupCoordinator, graph_capture_context: Optional[GraphCaptureContext] = None
) -> Iterator[GraphCaptureContext]:
    """Context manager for capturing this group's calls into a CUDA graph (vLLM's).

    Yields ``graph_capture_context`` (a new GraphCaptureContext when None). On CPU it does
    nothing else. On CUDA with torch, the capture stream (a new ``torch.cuda.Stream`` unless the
    context has one) first waits for the current stream, then is made current for the block, so
    the group's calls inside run on it.
    """
    if graph_capture_context is None:
        graph_capture_context = GraphCaptureContext()
    if not _is_cuda(self):
        yield graph_capture_context
        return
    import torch  # CUDA capture goes through torch's stream API

    if graph_capture_context.stream is None:
        graph_capture_context.stream = torch.cuda.Stream(device=self.device)
    stream = graph_capture_context.stream
    current = torch.cuda.current_stream(device=self.device)
    if current != stream:
        stream.wait_stream(current)
    with torch.cuda.stream(stream):
        yield graph_capture_context


GroupCoordinator.graph_capture = _group_graph_capture


@contextlib.contextmanager
def graph_capture(device: Any = None) -> Iterator[GraphCaptureContext]:
    """vLLM's module-level graph_capture: one context for the TP and PP groups.

    Yields a GraphCaptureContext; on CPU nothing else happens. ``device`` is accepted for vLLM
    compatibility (the groups know their device).
    """
    context = GraphCaptureContext()
    with get_tp_group().graph_capture(context), get_pp_group().graph_capture(context):
        yield context


__all__ = [
    "DeviceCommunicator",
    "DistributedError",
    "DistributedTimeoutError",
    "GraphCaptureContext",
    "GroupCoordinator",
    "Handle",
    "MessageQueue",
    "MessageQueueHandle",
    "ModelParallelShrink",
    "RankFailureError",
    "SourceFailedError",
    "SymmetricMemoryStats",
    "ProcessGroup",
    "Tensor",
    "WorldShrink",
    "__version__",
    "broadcast_tensor_dict",
    "destroy_distributed_environment",
    "destroy_model_parallel",
    "ensure_model_parallel_initialized",
    "find_dead_ranks",
    "get_dcp_group",
    "get_decode_context_model_parallel_rank",
    "get_decode_context_model_parallel_world_size",
    "get_default_array_library",
    "get_dp_group",
    "get_ep_group",
    "get_node_count",
    "get_pcp_group",
    "get_pipeline_model_parallel_group",
    "get_pp_group",
    "get_rank_failure_policy",
    "get_tensor_model_parallel_group",
    "get_tensor_model_parallel_rank",
    "get_tensor_model_parallel_world_size",
    "get_tp_group",
    "get_world_group",
    "graph_capture",
    "in_the_same_node_as",
    "init_distributed_environment",
    "initialize_model_parallel",
    "is_initialized",
    "are_collectives_interruptible",
    "is_interruptible",
    "model_parallel_is_initialized",
    "set_default_array_library",
    "set_interruptible",
    "set_rank_failure_policy",
    "shrink_model_parallel",
    "shrink_world",
    "tensor_model_parallel_all_gather",
    "tensor_model_parallel_all_reduce",
    "tensor_model_parallel_gather",
    "tensor_model_parallel_reduce_scatter",
]
