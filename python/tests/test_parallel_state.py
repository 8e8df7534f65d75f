"""parallel_state: getters, group layouts, rank properties, lifetime, vLLM's signatures. Groups
use the flavour's backend and arrays are the flavour's (gc_testing.py)."""

from __future__ import annotations


import numpy as np
import pytest

import groupcoord as gc
from gc_testing import (
    BACKEND,
    ON_CUDA,
    assert_result,
    device,
    launcher_local_rank,
    launcher_node_count,
    launcher_rank,
    launcher_world_size,
    model_parallel,
    ref,
    reference,
    requires_world_size,
)


def test_world_properties(world: gc.GroupCoordinator) -> None:
    ws, me = launcher_world_size(), launcher_rank()
    assert (world.rank, world.world_size, world.rank_in_group) == (me, ws, me)
    assert world.ranks == list(range(ws))
    assert world.unique_name.startswith("world:")
    assert (world.first_rank, world.last_rank) == (0, ws - 1)
    assert world.is_first_rank == (me == 0) and world.is_last_rank == (me == ws - 1)
    assert world.next_rank == (me + 1) % ws and world.prev_rank == (me - 1) % ws
    assert world.local_rank == launcher_local_rank() and world.device == device()
    assert world.device_communicator is None  # vLLM's world group has none
    assert isinstance(world.cpu_group, gc.ProcessGroup)
    assert world.cpu_group.size() == ws and world.cpu_group.rank() == me
    assert gc.is_initialized() and gc.get_node_count() == launcher_node_count()


def test_getters_return_the_same_object() -> None:
    assert gc.get_tp_group() is gc.get_tp_group()
    assert gc.get_tensor_model_parallel_group() is gc.get_tp_group()
    assert gc.get_pipeline_model_parallel_group() is gc.get_pp_group()
    assert gc.get_tensor_model_parallel_world_size() == gc.get_tp_group().world_size
    assert gc.get_tensor_model_parallel_rank() == gc.get_tp_group().rank_in_group
    assert gc.get_decode_context_model_parallel_world_size() == 1
    assert gc.get_decode_context_model_parallel_rank() == 0
    assert gc.model_parallel_is_initialized()


def test_device_communicator(tp: gc.GroupCoordinator) -> None:
    comm = tp.device_communicator
    if tp.world_size == 1:
        assert comm is None
        return
    assert comm.backend_name == ("cuda" if ON_CUDA else "cpu")
    assert (comm.world_size, comm.rank_in_group) == (tp.world_size, tp.rank_in_group)
    expected = sum(reference(r, (3,)) for r in range(tp.world_size))
    assert_result(comm.all_reduce(ref(tp.rank_in_group, (3,))), expected)


def test_destroyed_model_parallel_groups_raise(world_size: int) -> None:
    old = gc.get_tp_group()
    gc.destroy_model_parallel()
    assert not gc.model_parallel_is_initialized()
    with pytest.raises(gc.DistributedError, match="no longer exists"):
        old.world_size
    with pytest.raises(ValueError):
        gc.get_tp_group()
    gc.initialize_model_parallel(world_size, 1, 1, 1, BACKEND)  # positional, vLLM's order
    new = gc.get_tp_group()
    assert new is not old and new.world_size == world_size
    assert new.unique_name != old.unique_name  # names are never reused


@requires_world_size(4)
def test_layout_tp2_pp2(rank: int) -> None:
    with model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=2):
        tp, pp = gc.get_tp_group(), gc.get_pp_group()
        # vLLM: ranks = arange(4).reshape(DP=1, PP=2, PCP=1, TP=2): TP rows, PP columns.
        assert tp.ranks == [rank - rank % 2, rank - rank % 2 + 1]
        assert pp.ranks == [rank % 2, rank % 2 + 2]
        assert gc.get_dp_group().world_size == 1
        assert gc.get_ep_group().world_size == 2
        assert gc.get_dcp_group().world_size == 1 and gc.get_pcp_group().world_size == 1


@requires_world_size(4)
def test_layout_data_parallel(rank: int) -> None:
    with model_parallel(tensor_model_parallel_size=2, data_parallel_size=2):
        assert gc.get_dp_group().ranks == [rank % 2, rank % 2 + 2]
        assert gc.get_ep_group().world_size == 4


def test_keyword_arguments_as_vllm(world: gc.GroupCoordinator) -> None:
    ws = world.world_size
    g = gc.GroupCoordinator(group_ranks=[list(range(ws))], local_rank=world.local_rank,
                            torch_distributed_backend=BACKEND, use_device_communicator=True,
                            use_message_queue_broadcaster=False, group_name="kw",
                            use_all2all=False)
    h = gc.GroupCoordinator([list(range(ws))], world.local_rank, backend=BACKEND,
                            use_device_communicator=False)
    assert g.unique_name.startswith("kw:") and h.unique_name.startswith("anonymous:")
    assert g.torch_distributed_backend == BACKEND and g.group_ranks == [list(range(ws))]
    x = ref(g.rank_in_group, (2, 2))
    refs = [reference(r, (2, 2)) for r in range(ws)]
    assert_result(g.all_gather(input_=x, dim=0), np.concatenate(refs, 0))
    out = g.gather(input_=x, dst=0, dim=-1)
    if g.rank_in_group == 0:
        assert_result(out, np.concatenate(refs, -1))
    assert g.broadcast_object(obj="o", src=0) == "o"
    g.destroy()
    h.destroy()


def test_sibling_device_group(tp: gc.GroupCoordinator) -> None:
    sibling = tp.make_sibling_device_group("sibling")
    assert isinstance(sibling, gc.DeviceCommunicator)
    out = sibling.all_gather(ref(tp.rank_in_group, (2,)), dim=0)
    assert_result(out, np.concatenate([reference(r, (2,)) for r in range(tp.world_size)]))
    sibling.destroy()


def test_same_node(tp: gc.GroupCoordinator) -> None:
    # The suite's tp group is the whole world, its ranks filling the nodes in order.
    per_node = tp.world_size // launcher_node_count()
    expected = [r // per_node == 0 for r in range(tp.world_size)]
    assert gc.in_the_same_node_as(tp.cpu_group, source_rank=0) == expected
    assert gc.in_the_same_node_as(tp) == expected


def test_graph_capture(tp: gc.GroupCoordinator) -> None:
    """On CPU the context does nothing; on CUDA (torch) it yields a torch side stream that is
    current inside the block, and the group's calls run on it."""
    with gc.graph_capture() as context:
        assert isinstance(context, gc.GraphCaptureContext)
        if ON_CUDA:
            import torch  # the CUDA flavours' graph_capture goes through torch's streams

            assert isinstance(context.stream, torch.cuda.Stream)
            assert torch.cuda.current_stream() == context.stream
        else:
            assert context.stream is None
        out = tp.all_reduce(ref(tp.rank_in_group, (2,)))
        if ON_CUDA:
            context.stream.synchronize()  # `out` was made on the side stream
    assert_result(out, sum(reference(r, (2,)) for r in range(tp.world_size)))
    mine = gc.GraphCaptureContext()
    with tp.graph_capture(mine) as context:
        assert context is mine
