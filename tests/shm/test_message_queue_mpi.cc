// MessageQueue across processes (vLLM's tests/distributed/test_shm_broadcast.py, re-expressed):
// run by ctest under `mpirun -np N` (N = 1, 2, 4). Every rank runs every test; messages are
// pure functions of (stream, index) (message_reference.h), so each reader checks what it got
// against its own copy of what the writer sent.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/message_queue.h"
#include "message_reference.h"
#include "multi_process_test.h"
#include "shm_leak_check.h"

namespace groupcoord {
namespace testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

bool exists_in_dev_shm(const std::string& shm_name) {
  return ::access(("/dev/shm" + shm_name).c_str(), F_OK) == 0;
}

milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

class MessageQueueTest : public MultiProcessTest {
 protected:
  /// Message `index` of `stream` as the writer sends it.
  static std::string message(std::uint64_t stream, std::size_t index, std::size_t max_bytes,
                             std::size_t chunk_bytes) {
    return reference_message(stream, index, reference_size(stream, index, max_bytes, chunk_bytes));
  }
};

// vLLM's test_shm_broadcast: many messages of random sizes (0 bytes and several chunks among
// them) from a writer that is not rank 0, received in order and intact by every reader, with
// random pauses on every side so that sometimes the writer and sometimes a reader runs ahead.
TEST_F(MessageQueueTest, ThousandMessagesInOrderAndIntact) {
  const int writer = world_size() - 1;
  const std::size_t chunk = 4096;
  auto mq = MessageQueue::create_from_process_group(world(), chunk, 4, writer);
  ASSERT_EQ(mq->is_writer(), rank() == writer);
  ASSERT_EQ(mq->is_reader(), rank() != writer);
  EXPECT_EQ(mq->num_readers(), world_size() - 1);
  EXPECT_EQ(mq->writer_rank(), writer);
  std::vector<int> readers;
  for (int r = 0; r < world_size(); ++r) {
    if (r != writer) readers.push_back(r);
  }
  EXPECT_EQ(mq->reader_ranks(), readers);
  EXPECT_EQ(mq->reader_index(), rank() == writer ? -1 : rank());

  std::mt19937 jitter(static_cast<unsigned>(rank()) + 7);
  for (std::size_t i = 0; i < 1000; ++i) {
    const std::string expected = message(1, i, 3 * chunk, chunk);
    if (rank() == writer) {
      ASSERT_EQ(mq->broadcast_object(expected), expected);
    } else {
      const Bytes got = mq->broadcast_object();
      ASSERT_EQ(got.size(), expected.size()) << "message " << i;
      ASSERT_TRUE(got == expected) << "message " << i << " differs";
    }
    if (jitter() % 50 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  world()->barrier();
}

// The writer fills the ring while nobody reads: a full ring makes enqueue time out (promptly
// for a zero timeout), without writing anything, so the queue stays usable; a multi-chunk
// message that needs more free chunks than there are also times out cleanly. Then the writer
// runs many laps around the ring.
TEST_F(MessageQueueTest, FullRingTimesOutAndRingWraps) {
  const std::size_t chunk = 256, chunks = 3;
  auto mq = MessageQueue::create_from_process_group(world(), chunk, chunks, 0);
  const std::size_t payload = chunk - 16;
  auto small = [&](std::size_t i) { return reference_message(2, i, 1 + i % payload); };
  if (world_size() == 1) {
    // No readers: enqueue is a no-op, as in vLLM, and never waits.
    for (std::size_t i = 0; i < 10; ++i) EXPECT_NO_THROW(mq->enqueue(small(i), milliseconds(0)));
    EXPECT_EQ(mq->num_readers(), 0);
    return;
  }
  if (rank() == 0) {
    mq->enqueue(small(0), milliseconds(0));  // 1 of 3 chunks used
    const std::string three_chunks = reference_message(2, 999, 3 * payload);
    EXPECT_THROW(mq->enqueue(three_chunks, milliseconds(0)), TimeoutError);
    mq->enqueue(small(1), milliseconds(0));
    mq->enqueue(small(2), milliseconds(0));  // ring full
    EXPECT_THROW(mq->enqueue(small(3), milliseconds(0)), TimeoutError);
    const auto start = Clock::now();
    try {
      mq->enqueue(small(3), milliseconds(100));
      ADD_FAILURE() << "enqueue into a full ring did not time out";
    } catch (const TimeoutError& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find(mq->name()), std::string::npos) << what;
      EXPECT_NE(what.find("reader rank 1"), std::string::npos) << what;
    }
    EXPECT_GE(since(start).count(), 100);
  }
  world()->barrier();
  // Laps: the three messages that made it, then 10 laps' worth of new ones.
  for (std::size_t i = 0; i < 3 + 10 * chunks; ++i) {
    if (rank() == 0) {
      if (i >= 3) mq->enqueue(small(i));
    } else {
      ASSERT_EQ(mq->dequeue(), small(i)) << "message " << i;
    }
  }
  world()->barrier();
}

// A reader that sleeps before each dequeue holds the writer back: the writer waits instead of
// overwriting chunks the reader has not read (every message arrives intact), and its enqueues
// take at least as long as the reader needs to free the chunks.
TEST_F(MessageQueueTest, SlowReaderMakesWriterWait) {
  if (world_size() == 1) GTEST_SKIP() << "needs a reader";
  const std::size_t chunk = 512, chunks = 2, n = 20;
  const milliseconds nap(10);
  const int slow = world_size() - 1;
  auto mq = MessageQueue::create_from_process_group(world(), chunk, chunks, 0);
  world()->barrier();
  const auto start = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    const std::string expected = message(3, i, 2 * chunk, chunk);
    if (rank() == 0) {
      mq->enqueue(expected);
    } else {
      if (rank() == slow) std::this_thread::sleep_for(nap);
      ASSERT_EQ(mq->dequeue(), expected) << "message " << i;
    }
  }
  if (rank() == 0) {
    // The writer's last chunk needs the slow reader to have read all but `chunks` messages
    // (a message here takes at most 3 chunks, so at least n - chunks naps); 2 naps of slack
    // for barrier skew.
    EXPECT_GE(since(start), nap * static_cast<int>(n - chunks - 2));
  }
  world()->barrier();
}

// Overflow: messages several times the chunk size, exactly the ring's payload, larger than the
// whole ring (they stream through it), and 1 MiB.
TEST_F(MessageQueueTest, MessagesLargerThanChunkAndRing) {
  const std::size_t chunk = 1024, chunks = 3, payload = chunk - 16;
  auto mq = MessageQueue::create_from_process_group(world(), chunk, chunks, 0);
  const std::vector<std::size_t> sizes = {5 * chunk,   chunks * payload,     chunks * payload + 1,
                                          100 * chunk, std::size_t{1} << 20, 0};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::string expected = reference_message(4, i, sizes[i]);
    if (rank() == 0) {
      EXPECT_EQ(mq->broadcast_object(expected), expected);
    } else {
      const Bytes got = mq->broadcast_object();
      ASSERT_EQ(got.size(), expected.size()) << "message " << i;
      ASSERT_TRUE(got == expected) << "message " << i << " differs";
    }
  }
  world()->barrier();
}

// vLLM's single-reader variant: every other rank writes its own queue, the reader gets one queue
// per writer (in group-rank order) and reads all of them; for both reader positions and both
// blocking modes.
TEST_F(MessageQueueTest, SingleReaderQueues) {
  std::set<int> reader_positions = {0, world_size() - 1};
  for (int reader : reader_positions) {
    for (bool blocking : {false, true}) {
      auto queues =
          MessageQueue::create_from_process_group_single_reader(world(), 2048, 4, reader, blocking);
      if (world_size() == 1) {
        EXPECT_TRUE(queues.empty());
        continue;
      }
      if (!blocking) {
        for (auto& q : queues) q->wait_until_ready();
      }
      if (rank() == reader) {
        ASSERT_EQ(queues.size(), static_cast<std::size_t>(world_size() - 1));
        int expected_writer = reader == 0 ? 1 : 0;
        for (auto& q : queues) {
          EXPECT_TRUE(q->is_reader());
          EXPECT_EQ(q->writer_rank(), expected_writer);
          EXPECT_EQ(q->reader_ranks(), std::vector<int>{reader});
          EXPECT_EQ(q->reader_index(), 0);
          ++expected_writer;
          if (expected_writer == reader) ++expected_writer;
        }
      } else {
        ASSERT_EQ(queues.size(), 1u);
        EXPECT_TRUE(queues[0]->is_writer());
        EXPECT_EQ(queues[0]->writer_rank(), rank());
        EXPECT_EQ(queues[0]->num_readers(), 1);
      }
      // 50 messages per writer; the reader takes them round-robin.
      for (std::size_t i = 0; i < 50; ++i) {
        for (auto& q : queues) {
          const std::uint64_t stream = 100 + static_cast<std::uint64_t>(q->writer_rank());
          const std::string expected = message(stream, i, 5000, 2048);
          if (q->is_writer()) {
            q->enqueue(expected);
          } else {
            ASSERT_EQ(q->dequeue(), expected) << "writer " << q->writer_rank() << " message " << i;
          }
        }
      }
      world()->barrier();
    }
  }
}

// vLLM's test_message_queue_shutdown: a dequeue with nothing written raises TimeoutError after
// its (short) timeout; a zero timeout raises at once. Wrong-side calls are argument errors.
TEST_F(MessageQueueTest, DequeueWithNothingWrittenTimesOut) {
  auto mq = MessageQueue::create_from_process_group(world(), 1024, 2, 0);
  if (mq->is_reader()) {
    const auto start = Clock::now();
    EXPECT_THROW(mq->dequeue(milliseconds(50)), TimeoutError);
    EXPECT_GE(since(start).count(), 50);
    EXPECT_LT(since(start).count(), 5000);
    try {
      mq->dequeue(milliseconds(0));
      ADD_FAILURE() << "dequeue with nothing written returned";
    } catch (const TimeoutError& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find(mq->name()), std::string::npos) << what;
      EXPECT_NE(what.find("writer"), std::string::npos) << what;
    }
    EXPECT_THROW(mq->enqueue("x"), std::invalid_argument);
  } else {
    EXPECT_THROW(mq->dequeue(milliseconds(10)), std::invalid_argument);
    EXPECT_THROW(mq->broadcast_object(), std::invalid_argument);
    EXPECT_THROW(mq->enqueue("x", milliseconds(-1)), std::invalid_argument);
  }
  world()->barrier();
  // The failed calls left the queue usable.
  const std::string after = reference_message(5, 0, 100);
  EXPECT_EQ(mq->broadcast_object(rank() == 0 ? std::optional<Bytes>(after) : std::nullopt), after);
  world()->barrier();
}

// The segment's name is unlinked inside the creating call (robust to crashes later): no
// /dev/shm entry remains, while the queue keeps working. Every rank sees the same name.
TEST_F(MessageQueueTest, SegmentNameIsGoneAfterCreation) {
  for (bool blocking : {true, false}) {
    auto mq = MessageQueue::create_from_process_group(world(), 1024, 2, 0, blocking);
    if (world_size() == 1) {
      EXPECT_TRUE(mq->shm_name().empty());
      continue;
    }
    const std::string name = mq->shm_name();
    EXPECT_EQ(name.rfind("/gcmq-", 0), 0u) << name;
    EXPECT_FALSE(exists_in_dev_shm(name)) << name << " still exists";
    const std::string key = std::string("name/") + (blocking ? "b" : "nb");
    if (rank() == 0) {
      store()->set(key, name);
      EXPECT_NE(name.find("-" + std::to_string(::getpid()) + "-"), std::string::npos) << name;
    } else {
      EXPECT_EQ(store()->get(key), name);
    }
    if (!blocking) mq->wait_until_ready();
    const std::string expected = reference_message(6, blocking, 3000);
    EXPECT_EQ(mq->broadcast_object(rank() == 0 ? std::optional<Bytes>(expected) : std::nullopt),
              expected);
  }
  auto queues = MessageQueue::create_from_process_group_single_reader(world(), 1024, 2, 0);
  for (auto& q : queues) EXPECT_FALSE(exists_in_dev_shm(q->shm_name())) << q->shm_name();
  world()->barrier();
}

// Bad arguments raise std::invalid_argument on every rank before any collective, so the group
// stays in step and a valid queue can be created afterwards.
TEST_F(MessageQueueTest, BadArgumentsRaiseInvalidArgumentEverywhere) {
  auto expect_invalid = [&](auto&& create, const std::string& needle) {
    try {
      create();
      ADD_FAILURE() << "no exception; expected one mentioning '" << needle << "'";
    } catch (const std::invalid_argument& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_NE(what.find("world"), std::string::npos) << what;  // names the group
    }
  };
  auto mq = [&](std::size_t bytes, std::size_t chunks, int writer) {
    return [=] { MessageQueue::create_from_process_group(world(), bytes, chunks, writer); };
  };
  expect_invalid(mq(1024, 0, 0), "max_chunks");
  expect_invalid(mq(0, 4, 0), "max_chunk_bytes");
  expect_invalid(mq(16, 4, 0), "max_chunk_bytes");
  expect_invalid(mq(1024, 4, -1), "writer_rank -1");
  expect_invalid(mq(1024, 4, world_size()), "writer_rank " + std::to_string(world_size()));
  expect_invalid(mq(std::size_t{1} << 62, std::size_t{1} << 20, 0), "overflow");
  expect_invalid(
      [&] { MessageQueue::create_from_process_group_single_reader(world(), 1024, 4, -2); },
      "reader_rank -2");
  expect_invalid(
      [&] { MessageQueue::create_from_process_group_single_reader(world(), 1024, 0, 0); },
      "max_chunks");
  EXPECT_THROW(MessageQueue::create_from_process_group(nullptr, 1024, 4), std::invalid_argument);

  auto good = MessageQueue::create_from_process_group(world(), 1024, 4, 0);
  const std::string expected = reference_message(7, 0, 2500);
  EXPECT_EQ(good->broadcast_object(rank() == 0 ? std::optional<Bytes>(expected) : std::nullopt),
            expected);
  if (good->is_writer()) {
    EXPECT_THROW(good->set_default_timeout(milliseconds(-5)), std::invalid_argument);
  }
  world()->barrier();
}

// enqueue_error: every reader's next dequeue throws with the writer's text (here longer than a
// chunk, so it streams like an object), and the messages around it arrive as they were sent.
TEST_F(MessageQueueTest, WriterFailureReachesEveryReaderBetweenMessages) {
  if (world_size() == 1) GTEST_SKIP() << "needs a reader";
  const std::size_t chunk = 256;
  auto mq = MessageQueue::create_from_process_group(world(), chunk, 4, 0);
  const std::string why = "serializer threw: " + std::string(3 * chunk, 'x') + " end";
  if (rank() == 0) {
    mq->enqueue(reference_message(9, 0, 100));
    mq->enqueue_error(why);
    mq->enqueue(reference_message(9, 1, 700));
  } else {
    EXPECT_EQ(mq->dequeue(), reference_message(9, 0, 100));
    const auto start = Clock::now();
    try {
      mq->dequeue(milliseconds(20000));
      ADD_FAILURE() << "dequeue returned the writer's failure as a message";
    } catch (const TimeoutError& error) {
      ADD_FAILURE() << "timed out instead of reading the writer's failure: " << error.what();
    } catch (const SourceFailedError& error) {
      EXPECT_EQ(error.src(), 0);
      EXPECT_EQ(error.why(), why);
      const std::string what = error.what();
      EXPECT_NE(what.find("the writer (rank 0) failed instead of sending a message"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find(why), std::string::npos) << what;
    }
    EXPECT_LT(since(start).count(), 5000);
    EXPECT_EQ(mq->dequeue(), reference_message(9, 1, 700));
  }
  world()->barrier();
}

// A writer that goes away does not leave its readers waiting for their deadline: they read
// what was published, then get DistributedError (not a TimeoutError) at once.
TEST_F(MessageQueueTest, ClosedWriterFailsReadersPromptly) {
  if (world_size() == 1) GTEST_SKIP() << "needs a reader";
  auto mq = MessageQueue::create_from_process_group(world(), 512, 4, 0);
  if (rank() == 0) {
    for (std::size_t i = 0; i < 3; ++i) mq->enqueue(reference_message(8, i, 300));
    mq.reset();
  }
  world()->barrier();
  if (rank() != 0) {
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(mq->dequeue(), reference_message(8, i, 300));
    const auto start = Clock::now();
    try {
      mq->dequeue(milliseconds(20000));
      ADD_FAILURE() << "dequeue after the writer closed returned";
    } catch (const TimeoutError& error) {
      ADD_FAILURE() << "timed out instead of noticing the closed writer: " << error.what();
    } catch (const DistributedError& error) {
      EXPECT_NE(std::string(error.what()).find("closed"), std::string::npos) << error.what();
    }
    EXPECT_LT(since(start).count(), 5000);
  }
  world()->barrier();
}

// Likewise a reader that goes away: the writer fills the free chunks, then fails at once when
// it needs a chunk that reader will never read.
TEST_F(MessageQueueTest, ClosedReaderFailsWriterPromptly) {
  if (world_size() == 1) GTEST_SKIP() << "needs a reader";
  auto mq = MessageQueue::create_from_process_group(world(), 512, 2, 0);
  if (rank() != 0) mq.reset();
  world()->barrier();
  if (rank() == 0) {
    mq->enqueue("a");
    mq->enqueue("b");
    const auto start = Clock::now();
    try {
      mq->enqueue("c", milliseconds(20000));
      ADD_FAILURE() << "enqueue past a closed reader returned";
    } catch (const TimeoutError& error) {
      ADD_FAILURE() << "timed out instead of noticing the closed reader: " << error.what();
    } catch (const DistributedError& error) {
      EXPECT_NE(std::string(error.what()).find("closed"), std::string::npos) << error.what();
    }
    EXPECT_LT(since(start).count(), 5000);
  }
  world()->barrier();
}

// A reader whose dequeue times out in the middle of a multi-chunk message (the writer is held
// back by a slower reader) keeps what it has: the next dequeue completes the message intact.
TEST_F(MessageQueueTest, DequeueResumesAfterTimeoutMidMessage) {
  if (world_size() < 3) GTEST_SKIP() << "needs two readers";
  const std::size_t chunk = 1024, payload = chunk - 16;
  auto mq = MessageQueue::create_from_process_group(world(), chunk, 2, 0);
  const std::string expected = reference_message(9, 0, 20 * payload);
  world()->barrier();
  if (rank() == 0) {
    mq->enqueue(expected);
  } else if (rank() == 1) {
    int timeouts = 0, resumable = 0;
    Bytes got;
    while (true) {
      try {
        got = mq->dequeue(milliseconds(100));
        break;
      } catch (const TimeoutError& error) {
        ++timeouts;
        if (std::string(error.what()).find("resume") != std::string::npos) ++resumable;
        ASSERT_LT(timeouts, 200) << "the message never completed";
      }
    }
    EXPECT_GE(timeouts, 1);
    EXPECT_GE(resumable, 1) << "no timeout happened in the middle of the message";
    EXPECT_TRUE(got == expected) << "resumed message differs";
  } else {
    if (rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    EXPECT_TRUE(mq->dequeue() == expected);
  }
  world()->barrier();
}

// Last: no test left a segment behind in /dev/shm (the names carry the writer's pid).
TEST_F(MessageQueueTest, NoSegmentLeftInDevShm) { expect_no_queue_segments_left(world()); }

}  // namespace
}  // namespace testing
}  // namespace groupcoord
