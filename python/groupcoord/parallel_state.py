"""vLLM's ``vllm.distributed.parallel_state`` module path: the same names as the package.

``from groupcoord.parallel_state import get_tp_group`` reads like vLLM's import.
"""

from __future__ import annotations

from . import (
    GraphCaptureContext,
    GroupCoordinator,
    destroy_distributed_environment,
    destroy_model_parallel,
    ensure_model_parallel_initialized,
    get_dcp_group,
    get_decode_context_model_parallel_rank,
    get_decode_context_model_parallel_world_size,
    get_dp_group,
    get_ep_group,
    get_node_count,
    get_pcp_group,
    get_pipeline_model_parallel_group,
    get_pp_group,
    get_tensor_model_parallel_group,
    get_tensor_model_parallel_rank,
    get_tensor_model_parallel_world_size,
    get_tp_group,
    get_world_group,
    graph_capture,
    in_the_same_node_as,
    init_distributed_environment,
    initialize_model_parallel,
    model_parallel_is_initialized,
    shrink_model_parallel,
)

__all__ = [
    "GraphCaptureContext",
    "GroupCoordinator",
    "destroy_distributed_environment",
    "destroy_model_parallel",
    "ensure_model_parallel_initialized",
    "get_dcp_group",
    "get_decode_context_model_parallel_rank",
    "get_decode_context_model_parallel_world_size",
    "get_dp_group",
    "get_ep_group",
    "get_node_count",
    "get_pcp_group",
    "get_pipeline_model_parallel_group",
    "get_pp_group",
    "get_tensor_model_parallel_group",
    "get_tensor_model_parallel_rank",
    "get_tensor_model_parallel_world_size",
    "get_tp_group",
    "get_world_group",
    "graph_capture",
    "in_the_same_node_as",
    "init_distributed_environment",
    "initialize_model_parallel",
    "model_parallel_is_initialized",
    "shrink_model_parallel",
]
