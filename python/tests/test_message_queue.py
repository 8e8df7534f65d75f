"""vLLM's tests/distributed/test_shm_broadcast.py with numpy: one writer, every other rank
reads, messages in order, small and larger than a chunk (and than the whole ring); vLLM's
mq_broadcaster attribute; writers outside the group (external_writer_handle, export_handle,
create_from_handle), also in another process. Messages are pickled objects, the same in every
array flavour (the queues never touch the device groups)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import groupcoord as gc
from gc_testing import requires_min_world_size


def message(i: int) -> np.ndarray:
    """Message i, which every reader can rebuild: random size and content from seed i."""
    rng = np.random.default_rng(i)
    return rng.integers(0, 100, size=int(rng.integers(1, 3000)), dtype=np.int64)


def test_create_mq_broadcaster(tp: gc.GroupCoordinator) -> None:
    mq = tp.create_mq_broadcaster(writer_rank=0)
    assert mq.is_writer == (tp.rank_in_group == 0)
    assert mq.is_reader == (tp.rank_in_group != 0)
    assert mq.n_reader == tp.world_size - 1
    # Readers on the writer's node share its memory; the others (tools/two-hosts-test.sh puts
    # half the ranks on a second host) are served remotely.
    on_writers_node = gc.in_the_same_node_as(tp.cpu_group, source_rank=0)
    assert mq.n_local_reader == sum(on_writers_node) - 1
    for i in range(50):
        if mq.is_writer:
            mq.enqueue(message(i))
        else:
            np.testing.assert_array_equal(mq.dequeue(timeout=20), message(i))
    obj = {"step": 7} if mq.is_writer else None
    assert mq.broadcast_object(obj) == {"step": 7}
    tp.barrier()


class Unpicklable:
    def __reduce__(self):
        raise TypeError("refuses to be pickled (test)")


@requires_min_world_size(2)
@pytest.mark.parametrize("remote", [False, True])
def test_a_writer_that_cannot_pickle_tells_its_readers(tp: gc.GroupCoordinator, remote: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """enqueue of an object that cannot be pickled, and enqueue_error: each reader's next
    dequeue raises the writer's error (through shared memory, and over TCP for readers on other
    nodes), and the messages around it arrive."""
    if remote:
        monkeypatch.setenv("GROUPCOORD_MQ_FORCE_REMOTE", "1")
    mq = gc.MessageQueue.create_from_process_group(tp.cpu_group, 256, 4, writer_rank=0)
    told = "writer \\(rank 0\\) failed instead of sending a message"
    if mq.is_writer:
        mq.enqueue(message(1))
        with pytest.raises(TypeError, match="refuses to be pickled"):
            mq.enqueue(Unpicklable())
        mq.enqueue_error("the writer's own reason " + "x" * 1000)  # longer than a chunk
        mq.enqueue(message(2))
    else:
        np.testing.assert_array_equal(mq.dequeue(timeout=20), message(1))
        with pytest.raises(gc.SourceFailedError, match=f"{told}: TypeError: refuses to be pickled"):
            mq.dequeue(timeout=20)
        with pytest.raises(gc.SourceFailedError, match=f"{told}: the writer's own reason x{{1000}}$") as e:
            mq.dequeue(timeout=20)
        assert e.value.src == 0 and e.value.why == "the writer's own reason " + "x" * 1000
        np.testing.assert_array_equal(mq.dequeue(timeout=20), message(2))
    tp.barrier()


@requires_min_world_size(2)
def test_readers_on_other_nodes_are_served_over_tcp(tp: gc.GroupCoordinator,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers that cannot map the writer's memory (on another node; forced here) get every
    message over TCP, large ones included; a dequeue that times out loses nothing; the
    single-reader queues take the same path."""
    monkeypatch.setenv("GROUPCOORD_MQ_FORCE_REMOTE", "1")
    mq = gc.MessageQueue.create_from_process_group(tp.cpu_group, 1024, 4, writer_rank=0)
    assert mq.n_local_reader == 0 and mq.n_reader == tp.world_size - 1
    big = np.arange(10_000, dtype=np.float64)  # 80 kB, 20 times the ring
    for i in range(20):
        if mq.is_writer:
            mq.enqueue(message(i))
        else:
            np.testing.assert_array_equal(mq.dequeue(timeout=20), message(i))
    if mq.is_writer:
        mq.enqueue(big)
    else:
        np.testing.assert_array_equal(mq.dequeue(timeout=20), big)
        with pytest.raises(gc.DistributedTimeoutError):
            mq.dequeue(timeout=0.05)
    tp.barrier()
    if mq.is_writer:
        mq.enqueue("after a timeout")
    else:
        assert mq.dequeue(timeout=20) == "after a timeout"
    queues = tp.create_single_reader_mq_broadcasters(reader_rank_in_group=0, blocking=True)
    if tp.rank_in_group == 0:
        assert all(q.n_local_reader == 0 for q in queues)
        assert sorted(q.dequeue(timeout=20) for q in queues) == [
            ("from", r) for r in range(1, tp.world_size)]
    else:
        queues[0].enqueue(("from", tp.rank_in_group))
    tp.barrier()


def test_messages_larger_than_the_ring(tp: gc.GroupCoordinator) -> None:
    mq = gc.MessageQueue.create_from_process_group(tp.cpu_group, 1024, 4, writer_rank=0)
    big = np.arange(10_000, dtype=np.float64)  # 80 kB through a 4 kB ring
    for _ in range(3):
        if mq.is_writer:
            mq.enqueue(big, timeout=20)
        else:
            np.testing.assert_array_equal(mq.dequeue(timeout=20), big)
    tp.barrier()


def test_single_reader(tp: gc.GroupCoordinator) -> None:
    queues = tp.create_single_reader_mq_broadcasters(reader_rank_in_group=0, blocking=True)
    if tp.rank_in_group == 0:
        assert len(queues) == tp.world_size - 1
        got = sorted(q.dequeue(timeout=20) for q in queues)
        assert got == [("from", r) for r in range(1, tp.world_size)]
    else:
        (queue,) = queues
        queue.enqueue(("from", tp.rank_in_group))
    tp.barrier()


# ---- vLLM's mq_broadcaster attribute ---------------------------------------------------------


def test_mq_broadcaster_is_the_queue_of_broadcast_object(tp: gc.GroupCoordinator,
                                                         world: gc.GroupCoordinator) -> None:
    """TP groups use a message-queue broadcaster (as vLLM's): the property is that queue, so a
    message the writer enqueues through it is what the readers' broadcast_object returns."""
    assert world.mq_broadcaster is None  # vLLM's world group has none
    mq = tp.mq_broadcaster
    if tp.world_size == 1:
        assert mq is None
        return
    assert isinstance(mq, gc.MessageQueue)
    assert (mq.writer_rank, mq.n_reader) == (0, tp.world_size - 1)
    assert mq.is_writer == (tp.rank_in_group == 0)
    if mq.is_writer:
        assert mq.broadcast_object({"via": "property"}) == {"via": "property"}
    else:
        assert tp.broadcast_object(None, src=0) == {"via": "property"}
    tp.barrier()


def test_mq_broadcaster_outlives_its_coordinator(world: gc.GroupCoordinator) -> None:
    """The queue object stays valid after the coordinator is destroyed and dropped (vLLM's
    destroy() only forgets it): the processes can still talk through it."""
    ws = world.world_size
    g = gc.GroupCoordinator([list(range(ws))], world.local_rank, "gloo", False,
                            use_message_queue_broadcaster=True, group_name="mq_owner")
    mq = g.mq_broadcaster
    g.destroy()
    del g
    world.barrier()
    if ws == 1:
        assert mq is None
        return
    for i in range(3):
        obj = ("after destroy", i)
        assert mq.broadcast_object(obj if mq.is_writer else None) == obj
    world.barrier()


# ---- external writers (vLLM's external_writer_handle, export_handle, create_from_handle) -----


def test_message_queue_handle_round_trip() -> None:
    writer = gc.MessageQueue(2, 2, [4, 9], max_chunk_bytes=1024, max_chunks=4, timeout=5)
    handle = writer.export_handle()
    assert isinstance(handle, gc.MessageQueueHandle)
    assert handle.local_reader_ranks == [4, 9]
    assert handle.buffer_handle == (2, 1024, 4, handle.shm_name)
    assert handle.remote_subscribe_addr is None and handle.writer_pid == os.getpid()
    assert writer.writer_rank == -1 and writer.is_writer and writer.n_reader == 2
    for copy in (pickle.loads(pickle.dumps(handle)),
                 gc.MessageQueueHandle.from_bytes(handle.to_bytes())):
        assert copy == handle and hash(copy) == hash(handle)
    with pytest.raises(ValueError, match="too short"):
        gc.MessageQueueHandle.from_bytes(b"junk")
    with pytest.raises(ValueError, match=r"rank 3 is not among the handle's reader ranks \[4, 9\]"):
        gc.MessageQueue.create_from_handle(handle, 3)
    with pytest.raises(ValueError, match="other nodes"):
        gc.MessageQueue(2, 1)
    readers = [gc.MessageQueue.create_from_handle(handle.to_bytes(), 9),
               gc.MessageQueue.create_from_handle(handle, 4, timeout=5)]
    assert [r.local_reader_rank for r in readers] == [1, 0]
    writer.enqueue({"a": np.arange(3)})
    for r in readers:
        got = r.dequeue(timeout=5)
        np.testing.assert_array_equal(got["a"], np.arange(3))


def _one_process_pair(max_chunks: int = 4) -> tuple[gc.MessageQueue, gc.MessageQueue]:
    """A writer and its one reader in this process, ready in vLLM's order (the writer first)."""
    writer = gc.MessageQueue(1, 1, max_chunk_bytes=1024, max_chunks=max_chunks, timeout=10)
    reader = gc.MessageQueue.create_from_handle(writer.export_handle(), 0, timeout=10)
    writer.wait_until_ready(timeout=3)  # the reader attached; it has not called it yet
    reader.wait_until_ready(timeout=3)
    return writer, reader


def _cancelled_within(queue: gc.MessageQueue, call, delay: float) -> float:
    """Runs call() on a thread, shuts the queue down after `delay` s; the call must raise a
    RuntimeError saying "cancelled". Returns the seconds from shutdown to the error."""
    outcome: list = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except RuntimeError as e:
            outcome.append((e, time.monotonic()))

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(delay)
    shut = time.monotonic()
    queue.shutdown()
    thread.join(timeout=20)
    assert outcome and outcome[0] is not None, "the call returned normally"
    error, at = outcome[0]
    assert "cancelled" in str(error)
    return at - shut


def test_shutdown_from_another_thread_cancels_waits() -> None:
    # vLLM's test_shm_broadcast shutdown cases: a reader asleep in dequeue, one still spinning,
    # a writer waiting for a free chunk; each raises "cancelled" promptly, later calls too.
    writer, reader = _one_process_pair()
    assert _cancelled_within(reader, reader.dequeue, 0.3) < 0.1
    assert reader.is_shut_down
    with pytest.raises(RuntimeError, match="cancelled"):
        reader.dequeue(timeout=0)
    writer2, reader2 = _one_process_pair()
    assert _cancelled_within(reader2, reader2.dequeue, 0.0) < 0.1
    writer3, reader3 = _one_process_pair(max_chunks=2)
    writer3.enqueue("a")
    writer3.enqueue("b")
    assert _cancelled_within(writer3, lambda: writer3.enqueue("c"), 0.3) < 0.1
    assert reader3.dequeue(timeout=1) == "a", "the peer is not affected"


def test_indefinite_dequeue_and_the_warning_interval() -> None:
    writer, reader = _one_process_pair()
    reader.warning_interval = 0.05
    assert reader.warning_interval == pytest.approx(0.05)
    with pytest.raises(ValueError):
        reader.warning_interval = 0
    with pytest.raises(gc.DistributedTimeoutError):
        reader.dequeue(timeout=0.2, indefinite=True)
    writer.enqueue(7)
    assert reader.dequeue(indefinite=True) == 7


@pytest.mark.parametrize("entry", ["create_mq_broadcaster", "create_from_process_group"])
def test_external_writer_handle(tp: gc.GroupCoordinator, entry: str) -> None:
    """vLLM's external writer: a queue made outside the group (here by the writer rank's process,
    on a thread of its own, as an engine's scheduler would in another process). Only the writer
    rank passes its handle; every rank of the group, the writer rank included, reads."""
    ws, me = tp.world_size, tp.rank_in_group
    w = ws - 1
    writer = feeding = None
    handle = None
    if me == w:
        writer = gc.MessageQueue(ws, ws, max_chunk_bytes=4096, max_chunks=4, timeout=20)
        handle = writer.export_handle()

        def feed() -> None:
            writer.wait_until_ready(timeout=20)
            for i in range(30):
                writer.enqueue(message(i), timeout=20)

        feeding = threading.Thread(target=feed)
        feeding.start()
    if entry == "create_mq_broadcaster":
        mq = tp.create_mq_broadcaster(writer_rank=w, external_writer_handle=handle,
                                      blocking=False)
        mq.wait_until_ready(timeout=20)
    else:  # the handle as bytes; blocking: the writer thread answers the handshake
        mq = gc.MessageQueue.create_from_process_group(
            tp.cpu_group, 1 << 22, 6, writer_rank=w,
            external_writer_handle=handle.to_bytes() if handle else None, blocking=True)
    assert mq.is_reader and not mq.is_writer and mq.writer_rank == -1
    assert (mq.n_reader, mq.local_reader_rank) == (ws, me)
    assert mq.max_chunk_bytes == 4096  # the handle's sizes, not the call's
    for i in range(30):
        np.testing.assert_array_equal(mq.dequeue(timeout=20), message(i))
    if feeding is not None:
        feeding.join(timeout=20)
        assert not feeding.is_alive()
    tp.barrier()


def test_bad_external_writer_handle_raises_everywhere(tp: gc.GroupCoordinator) -> None:
    """Junk on the writer rank, or a handle that leaves out group ranks: ValueError on every
    rank (no rank left waiting in the collective), and the group stays usable."""
    me = tp.rank_in_group
    with pytest.raises(ValueError):
        tp.create_mq_broadcaster(external_writer_handle=b"junk" if me == 0 else None)
    # Non-writer ranks' values are ignored, as in vLLM.
    mq = tp.create_mq_broadcaster(external_writer_handle=None if me == 0 else b"ignored")
    assert mq.is_writer == (me == 0)
    if tp.world_size > 1:
        partial = None
        if me == 0:
            partial = gc.MessageQueue(1, 1, [0], max_chunk_bytes=1024, max_chunks=2)
        with pytest.raises(ValueError, match="not among the external writer's reader ranks"):
            tp.create_mq_broadcaster(
                external_writer_handle=partial.export_handle() if partial else None)
    assert tp.broadcast_object("still in step" if me == 0 else None, src=0) == "still in step"


# The external writer of test_external_writer_process: a process outside every group (vLLM's
# engine core), which prints its handle and then feeds the queue.
EXTERNAL_WRITER = """
import sys
import numpy as np
import groupcoord as gc

def message(i):
    rng = np.random.default_rng(i)
    return rng.integers(0, 100, size=int(rng.integers(1, 3000)), dtype=np.int64)

n = int(sys.argv[1])
mq = gc.MessageQueue(n, n, max_chunk_bytes=2048, max_chunks=4, timeout=30)
print(mq.export_handle().to_bytes().hex(), flush=True)
mq.wait_until_ready(timeout=30)
for i in range(20):
    mq.enqueue(message(i), timeout=30)
mq.enqueue("done", timeout=30)
"""


def test_external_writer_process(tp: gc.GroupCoordinator) -> None:
    """A writer in another process (a child of group rank 0, in no group): rank 0 hands its
    handle to the group, every rank attaches with create_from_handle(handle, rank_in_group),
    reads everything, and still reads what was published after the writer exited."""
    me = tp.rank_in_group
    child = None
    if me == 0:
        child = subprocess.Popen([sys.executable, "-c", EXTERNAL_WRITER, str(tp.world_size)],
                                 stdout=subprocess.PIPE, text=True)
        handle = gc.MessageQueueHandle.from_bytes(bytes.fromhex(child.stdout.readline().strip()))
    handle = tp.broadcast_object(handle if me == 0 else None, src=0)  # pickled
    mq = gc.MessageQueue.create_from_handle(handle, me, timeout=20)
    mq.wait_until_ready(timeout=20)
    try:
        for i in range(20):
            np.testing.assert_array_equal(mq.dequeue(timeout=20), message(i))
        assert mq.dequeue(timeout=20) == "done"
    finally:
        if child is not None:
            assert child.wait(timeout=30) == 0
    tp.barrier()
