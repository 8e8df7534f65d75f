"""Type stubs of the extension module groupcoord._groupcoord (the C++ core)."""

from __future__ import annotations

import datetime
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple, Union, overload

# An array: numpy.ndarray, torch.Tensor, cupy.ndarray, groupcoord.Tensor, or any object with
# __dlpack__ / __dlpack_device__.
Array = Any
# seconds (int or float) or a datetime.timedelta
Timeout = Union[float, int, datetime.timedelta, None]
# an int handle, or an object with cuda_stream, __cuda_stream__ or ptr (torch/cupy streams)
Stream = Any
# a dtype name ("float32", "bfloat16"), a numpy dtype or scalar type, or a torch.dtype
DTypeLike = Any

__version__: str
_built_with_cuda: bool

class DistributedError(RuntimeError):
    """A dead or misbehaving peer, or a broken group (C++: groupcoord::DistributedError)."""

class DistributedTimeoutError(TimeoutError, DistributedError):
    """A deadline expired (C++: groupcoord::TimeoutError)."""

class Tensor:
    """An array owned by groupcoord, exported through DLPack (torch.from_dlpack, np.asarray)."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def strides(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...
    # stream (CUDA, DLPack numbers): None or 1 legacy default, 2 per-thread default, -1 no
    # synchronisation, else a cudaStream_t; 0 raises ValueError. Ordered with an event.
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    @property
    def __array_interface__(self) -> dict: ...
    def numpy(self) -> Any: ...

class Handle:
    """Handle of an asynchronous operation."""

    def wait(self, timeout: Timeout = None) -> None: ...
    def is_completed(self) -> bool: ...

class ProcessGroup:
    """A Gloo process group (opaque)."""

    def rank(self) -> int: ...
    def size(self) -> int: ...
    @property
    def ranks(self) -> list[int]: ...
    @property
    def name(self) -> str: ...
    @property
    def timeout(self) -> float: ...
    def is_broken(self) -> bool: ...

class MessageQueueHandle:
    """vLLM's shm_broadcast.Handle: what readers need to attach to a MessageQueue. Picklable."""

    @property
    def local_reader_ranks(self) -> list[int]: ...
    @property
    def buffer_handle(self) -> Tuple[int, int, int, str]: ...
    @property
    def shm_name(self) -> str: ...
    @property
    def max_chunk_bytes(self) -> int: ...
    @property
    def max_chunks(self) -> int: ...
    @property
    def writer_pid(self) -> int: ...
    @property
    def local_subscribe_addr(self) -> None: ...
    @property
    def remote_subscribe_addr(self) -> None: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> MessageQueueHandle: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

# An external writer's handle: the object, or its to_bytes().
HandleLike = Union[MessageQueueHandle, bytes, bytearray]

class MessageQueue:
    """vLLM's shared-memory broadcaster (shm_broadcast.MessageQueue)."""

    def __init__(
        self,
        n_reader: int,
        n_local_reader: int,
        local_reader_ranks: Optional[list[int]] = None,
        max_chunk_bytes: int = 1 << 22,
        max_chunks: int = 6,
        connect_ip: Optional[str] = None,
        *,
        timeout: Timeout = None,
    ) -> None: ...
    def export_handle(self) -> MessageQueueHandle: ...
    @staticmethod
    def create_from_handle(
        handle: HandleLike, rank: int, *, timeout: Timeout = None
    ) -> MessageQueue: ...
    @staticmethod
    def create_from_process_group(
        pg: Union[ProcessGroup, GroupCoordinator],
        max_chunk_bytes: int,
        max_chunks: int,
        writer_rank: int = 0,
        external_writer_handle: Optional[HandleLike] = None,
        blocking: bool = True,
    ) -> MessageQueue: ...
    @staticmethod
    def create_from_process_group_single_reader(
        pg: Union[ProcessGroup, GroupCoordinator],
        max_chunk_bytes: int,
        max_chunks: int,
        reader_rank: int = 0,
        blocking: bool = False,
    ) -> list[MessageQueue]: ...
    def enqueue(self, obj: Any, timeout: Timeout = None) -> None: ...
    def dequeue(self, timeout: Timeout = None, indefinite: bool = False) -> Any: ...
    def shutdown(self) -> None: ...
    @property
    def is_shut_down(self) -> bool: ...
    @property
    def warning_interval(self) -> float: ...
    @warning_interval.setter
    def warning_interval(self, seconds: float) -> None: ...
    def broadcast_object(self, obj: Any = None) -> Any: ...
    def wait_until_ready(self, timeout: Timeout = None) -> None: ...
    @property
    def is_writer(self) -> bool: ...
    @property
    def is_reader(self) -> bool: ...
    @property
    def n_reader(self) -> int: ...
    @property
    def n_local_reader(self) -> int: ...
    @property
    def local_reader_rank(self) -> int: ...
    @property
    def writer_rank(self) -> int: ...
    @property
    def reader_ranks(self) -> list[int]: ...
    @property
    def max_chunk_bytes(self) -> int: ...
    @property
    def max_chunks(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def shm_name(self) -> str: ...
    default_timeout: float

class SymmetricMemoryStats:
    """State and counters of a group's NCCL symmetric memory (a read-only snapshot)."""
    enabled: bool
    disabled_reason: str
    window_kind: str
    windows_registered: int
    symmetric_calls: int
    fallbacks: int
    zero_copy_calls: int
    scratch_bytes: int
    pool_bytes: int

class DeviceCommunicator:
    """The device half of a GroupCoordinator (vLLM's DeviceCommunicatorBase)."""

    @property
    def backend_name(self) -> str: ...
    @property
    def rank_in_group(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    def destroy(self) -> None: ...
    def all_reduce(
        self, input_: Array, out: Optional[Array] = None, *, stream: Stream = None
    ) -> Array: ...
    def all_gather(
        self, input_: Array, dim: int = -1, out: Optional[Array] = None, *, stream: Stream = None
    ) -> Array: ...
    def all_gatherv(
        self,
        input_: Union[Array, Sequence[Array]],
        dim: int = 0,
        sizes: Optional[Sequence[int]] = None,
        *,
        stream: Stream = None,
    ) -> Union[Array, list[Array]]: ...
    def reduce_scatter(
        self, input_: Array, dim: int = -1, out: Optional[Array] = None, *, stream: Stream = None
    ) -> Array: ...
    def reduce_scatterv(
        self,
        input_: Array,
        dim: int = -1,
        sizes: Optional[Sequence[int]] = None,
        *,
        stream: Stream = None,
    ) -> Array: ...
    def gather(
        self, input_: Array, dst: int = 0, dim: int = -1, *, stream: Stream = None
    ) -> Optional[Array]: ...
    def broadcast(self, tensor: Array, src: int = 0, *, stream: Stream = None) -> Array: ...
    def send(self, tensor: Array, dst: Optional[int] = None, *, stream: Stream = None) -> None: ...
    def recv(
        self,
        size: Union[int, Sequence[int]],
        dtype: DTypeLike,
        src: Optional[int] = None,
        *,
        stream: Stream = None,
        array_library: Optional[str] = None,
    ) -> Array: ...
    def isend(self, tensor: Array, dst: int) -> Handle: ...
    def irecv(self, tensor: Array, src: int) -> Handle: ...
    def dispatch_router_logits(
        self,
        hidden_states: Array,
        router_logits: Array,
        is_sequence_parallel: bool = False,
        extra_tensors: Optional[list[Array]] = None,
        *,
        stream: Stream = None,
    ) -> tuple: ...
    def dispatch(
        self,
        hidden_states: Array,
        topk_weights: Array,
        topk_ids: Array,
        is_sequence_parallel: bool = False,
        extra_tensors: Optional[list[Array]] = None,
        *,
        stream: Stream = None,
    ) -> tuple: ...
    def combine(
        self, hidden_states: Array, is_sequence_parallel: bool = False, *, stream: Stream = None
    ) -> Array: ...

class GroupCoordinator:
    """vLLM's GroupCoordinator without PyTorch."""

    @overload
    def __init__(
        self,
        group_ranks: list[list[int]],
        local_rank: int,
        torch_distributed_backend: str,
        use_device_communicator: bool,
        use_message_queue_broadcaster: bool = False,
        group_name: Optional[str] = None,
        use_all2all: bool = False,
        *,
        timeout: Timeout = None,
    ) -> None: ...
    @overload
    def __init__(
        self,
        group_ranks: list[list[int]],
        local_rank: int,
        backend: str,
        use_device_communicator: bool,
        use_message_queue_broadcaster: bool = False,
        group_name: Optional[str] = None,
        use_all2all: bool = False,
        *,
        timeout: Timeout = None,
    ) -> None: ...
    # ranks and groups
    @property
    def rank(self) -> int: ...
    @property
    def ranks(self) -> list[int]: ...
    @property
    def world_size(self) -> int: ...
    @property
    def local_rank(self) -> int: ...
    @property
    def device_index(self) -> int: ...
    @property
    def rank_in_group(self) -> int: ...
    @property
    def unique_name(self) -> str: ...
    @property
    def first_rank(self) -> int: ...
    @property
    def last_rank(self) -> int: ...
    @property
    def is_first_rank(self) -> bool: ...
    @property
    def is_last_rank(self) -> bool: ...
    @property
    def next_rank(self) -> int: ...
    @property
    def prev_rank(self) -> int: ...
    @property
    def group_ranks(self) -> list[list[int]]: ...
    @property
    def torch_distributed_backend(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def cpu_group(self) -> ProcessGroup: ...
    @property
    def device_group(self) -> Optional[ProcessGroup]: ...
    @property
    def device_communicator(self) -> Optional[DeviceCommunicator]: ...
    @property
    def mq_broadcaster(self) -> Optional[MessageQueue]: ...
    # tensors
    def all_reduce(
        self, input_: Array, out: Optional[Array] = None, *, stream: Stream = None
    ) -> Array: ...
    def all_gather(
        self, input_: Array, dim: int = -1, out: Optional[Array] = None, *, stream: Stream = None
    ) -> Array: ...
    def all_gatherv(
        self,
        input_: Union[Array, Sequence[Array]],
        dim: int = 0,
        sizes: Optional[Sequence[int]] = None,
        *,
        stream: Stream = None,
    ) -> Union[Array, list[Array]]: ...
    def reduce_scatter(
        self, input_: Array, dim: int = -1, out: Optional[Array] = None, *, stream: Stream = None
    ) -> Array: ...
    def reduce_scatterv(
        self,
        input_: Array,
        dim: int = -1,
        sizes: Optional[Sequence[int]] = None,
        *,
        stream: Stream = None,
    ) -> Array: ...
    def gather(
        self, input_: Array, dst: int = 0, dim: int = -1, *, stream: Stream = None
    ) -> Optional[Array]: ...
    def broadcast(self, input_: Array, src: int = 0, *, stream: Stream = None) -> Array: ...
    def send(self, tensor: Array, dst: Optional[int] = None, *, stream: Stream = None) -> None: ...
    def recv(
        self,
        size: Union[int, Sequence[int]],
        dtype: DTypeLike,
        src: Optional[int] = None,
        *,
        stream: Stream = None,
        array_library: Optional[str] = None,
    ) -> Array: ...
    # objects
    def broadcast_object(self, obj: Any = None, src: int = 0) -> Any: ...
    def broadcast_object_list(
        self, obj_list: list[Any], src: int = 0, group: Any = None
    ) -> list[Any]: ...
    def send_object(self, obj: Any, dst: int) -> None: ...
    def recv_object(self, src: int) -> Any: ...
    def isend_object(self, obj: Any, dst: int) -> Handle: ...
    # tensor dictionaries
    def broadcast_tensor_dict(
        self,
        tensor_dict: Optional[dict[str, Any]] = None,
        src: int = 0,
        group: Any = None,
        metadata_group: Any = None,
        *,
        stream: Stream = None,
        array_library: Optional[str] = None,
    ) -> Optional[dict[str, Any]]: ...
    def send_tensor_dict(
        self,
        tensor_dict: dict[str, Any],
        dst: Optional[int] = None,
        all_gather_group: Optional[GroupCoordinator] = None,
        all_gather_tensors: Optional[dict[str, bool]] = None,
        *,
        stream: Stream = None,
    ) -> Optional[dict[str, Any]]: ...
    def isend_tensor_dict(
        self,
        tensor_dict: dict[str, Any],
        dst: Optional[int] = None,
        all_gather_group: Optional[GroupCoordinator] = None,
        all_gather_tensors: Optional[dict[str, bool]] = None,
        *,
        stream: Stream = None,
    ) -> list[Handle]: ...
    def recv_tensor_dict(
        self,
        src: Optional[int] = None,
        all_gather_group: Optional[GroupCoordinator] = None,
        all_gather_tensors: Optional[dict[str, bool]] = None,
        *,
        stream: Stream = None,
        array_library: Optional[str] = None,
    ) -> Optional[dict[str, Any]]: ...
    def irecv_tensor_dict(
        self,
        src: Optional[int] = None,
        all_gather_group: Optional[GroupCoordinator] = None,
        all_gather_tensors: Optional[dict[str, bool]] = None,
        *,
        stream: Stream = None,
        array_library: Optional[str] = None,
    ) -> Tuple[Optional[dict[str, Any]], list[Handle], list[Callable[[], None]]]: ...
    # the rest
    def barrier(self) -> None: ...
    def destroy(self) -> None: ...
    def make_sibling_device_group(self, group_desc: Optional[str] = None) -> DeviceCommunicator: ...
    def create_mq_broadcaster(
        self,
        writer_rank: int = 0,
        external_writer_handle: Optional[HandleLike] = None,
        blocking: bool = True,
    ) -> MessageQueue: ...
    def create_single_reader_mq_broadcasters(
        self, reader_rank_in_group: int = 0, blocking: bool = False
    ) -> list[MessageQueue]: ...
    # NCCL symmetric memory
    def symmetric_empty(
        self, size: Any, dtype: Any, *, stream: Stream = None, array_library: Optional[str] = None
    ) -> Array: ...
    def reserve_symmetric_scratch(self, nbytes: int) -> None: ...
    @property
    def symmetric_memory_stats(self) -> SymmetricMemoryStats: ...
    def dispatch_router_logits(
        self,
        hidden_states: Array,
        router_logits: Array,
        is_sequence_parallel: bool = False,
        extra_tensors: Optional[list[Array]] = None,
        *,
        stream: Stream = None,
    ) -> tuple: ...
    def dispatch(
        self,
        hidden_states: Array,
        topk_weights: Array,
        topk_ids: Array,
        is_sequence_parallel: bool = False,
        extra_tensors: Optional[list[Array]] = None,
        *,
        stream: Stream = None,
    ) -> tuple: ...
    def combine(
        self, hidden_states: Array, is_sequence_parallel: bool = False, *, stream: Stream = None
    ) -> Array: ...
    # defined in groupcoord/__init__.py
    def graph_capture(self, graph_capture_context: Any = None) -> Any: ...

def init_distributed_environment(
    world_size: int = -1,
    rank: int = -1,
    distributed_init_method: str = "env://",
    local_rank: int = -1,
    backend: str = "",
    timeout: Timeout = None,
) -> None: ...
def initialize_model_parallel(
    tensor_model_parallel_size: int = 1,
    pipeline_model_parallel_size: int = 1,
    prefill_context_model_parallel_size: int = 1,
    decode_context_model_parallel_size: Optional[int] = 1,
    backend: Optional[str] = None,
    data_parallel_size: int = 1,
) -> None: ...
def ensure_model_parallel_initialized(
    tensor_model_parallel_size: int,
    pipeline_model_parallel_size: int,
    prefill_context_model_parallel_size: int = 1,
    decode_context_model_parallel_size: Optional[int] = 1,
    backend: Optional[str] = None,
) -> None: ...
def model_parallel_is_initialized() -> bool: ...
def is_initialized() -> bool: ...
def destroy_model_parallel() -> None: ...
def destroy_distributed_environment() -> None: ...
def get_world_group() -> GroupCoordinator: ...
def get_tp_group() -> GroupCoordinator: ...
def get_tensor_model_parallel_group() -> GroupCoordinator: ...
def get_pp_group() -> GroupCoordinator: ...
def get_pipeline_model_parallel_group() -> GroupCoordinator: ...
def get_dp_group() -> GroupCoordinator: ...
def get_ep_group() -> GroupCoordinator: ...
def get_dcp_group() -> GroupCoordinator: ...
def get_pcp_group() -> GroupCoordinator: ...
def get_tensor_model_parallel_world_size() -> int: ...
def get_tensor_model_parallel_rank() -> int: ...
def get_decode_context_model_parallel_world_size() -> int: ...
def get_decode_context_model_parallel_rank() -> int: ...
def get_node_count() -> int: ...
def in_the_same_node_as(
    pg: Union[ProcessGroup, GroupCoordinator], source_rank: int = 0
) -> list[bool]: ...
def set_default_array_library(name: str, device_type: str = "cpu") -> None: ...
def get_default_array_library(device_type: str = "cpu") -> str: ...
def set_interruptible(enabled: bool, collectives: bool = False) -> None: ...
def is_interruptible() -> bool: ...
def are_collectives_interruptible() -> bool: ...
def _abandoned_calls_in_flight() -> int: ...
def _bench_all_reduce(group: GroupCoordinator, iterations: int) -> float: ...
