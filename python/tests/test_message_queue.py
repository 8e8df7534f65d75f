"""vLLM's tests/distributed/test_shm_broadcast.py with numpy: one writer, every other rank
reads, messages in order, small and larger than a chunk (and than the whole ring)."""

from __future__ import annotations

import numpy as np

import groupcoord as gc


def message(i: int) -> np.ndarray:
    """Message i, which every reader can rebuild: random size and content from seed i."""
    rng = np.random.default_rng(i)
    return rng.integers(0, 100, size=int(rng.integers(1, 3000)), dtype=np.int64)


def test_create_mq_broadcaster(tp: gc.GroupCoordinator) -> None:
    mq = tp.create_mq_broadcaster(writer_rank=0)
    assert mq.is_writer == (tp.rank_in_group == 0)
    assert mq.is_reader == (tp.rank_in_group != 0)
    assert mq.n_reader == tp.world_size - 1
    for i in range(50):
        if mq.is_writer:
            mq.enqueue(message(i))
        else:
            np.testing.assert_array_equal(mq.dequeue(timeout=20), message(i))
    obj = {"step": 7} if mq.is_writer else None
    assert mq.broadcast_object(obj) == {"step": 7}
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
