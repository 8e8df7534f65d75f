// The parts of vLLM's MessageQueue API that its own tests use (one process, a writer and a reader
// of one handle): shutdown() from another thread wakes a reader asleep or spinning in dequeue and
// a writer waiting for a free chunk, which raise "cancelled" (as every later call); the writer's
// wait_until_ready() before the reader's in one thread; dequeue(indefinite=true) writes no
// long-wait line and the default does, at the interval set.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/message_queue.h"

namespace groupcoord {
namespace testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kTimeout{10000};

struct Pair {
  std::unique_ptr<MessageQueue> writer;
  std::unique_ptr<MessageQueue> reader;
};

/// A writer for one reader and that reader, in this process, both ready.
Pair make_pair_of_queues(std::size_t max_chunks = 4) {
  Pair p;
  p.writer = MessageQueue::create(1, 1024, max_chunks, {0}, kTimeout);
  p.reader = MessageQueue::create_from_handle(p.writer->export_handle(), 0, kTimeout);
  p.writer->wait_until_ready(milliseconds(5000));
  p.reader->wait_until_ready(milliseconds(5000));
  return p;
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// Runs `call` on a thread, shuts `queue` down after `delay`, and returns how long the call took
/// to fail after the shutdown (ms); the failure must say "cancelled".
template <typename Call>
double cancel_after(MessageQueue& queue, milliseconds delay, Call call) {
  auto outcome = std::async(std::launch::async, [&] {
    try {
      call();
    } catch (const DistributedError& e) {
      return std::string(e.what());
    }
    return std::string("returned normally");
  });
  std::this_thread::sleep_for(delay);
  const auto shut = Clock::now();
  queue.shutdown();
  const std::string what = outcome.get();
  const double took = ms_since(shut);
  EXPECT_NE(what.find("cancelled"), std::string::npos) << what;
  return took;
}

TEST(QueueControl, WriterThenReaderReadyInOneThread) {
  auto writer = MessageQueue::create(1, 1024, 4, {0}, kTimeout);
  auto reader = MessageQueue::create_from_handle(writer->export_handle(), 0, kTimeout);
  const auto start = Clock::now();
  writer->wait_until_ready(milliseconds(3000));  // the reader has attached, not called it yet
  reader->wait_until_ready(milliseconds(3000));
  EXPECT_LT(ms_since(start), 1000);
  writer->enqueue("hello");
  EXPECT_EQ(reader->dequeue(), "hello");
}

TEST(QueueControl, ShutdownWakesASleepingReader) {
  Pair p = make_pair_of_queues();
  // 300 ms: far past the spin and yield phases, so the reader sleeps in the kernel.
  const double took = cancel_after(*p.reader, milliseconds(300), [&] { p.reader->dequeue(); });
  EXPECT_LT(took, 100);
  EXPECT_TRUE(p.reader->is_shut_down());
  EXPECT_THROW(p.reader->dequeue(milliseconds(0)), DistributedError) << "later calls too";
}

TEST(QueueControl, ShutdownWakesASpinningReader) {
  Pair p = make_pair_of_queues();
  const double took = cancel_after(*p.reader, milliseconds(0), [&] { p.reader->dequeue(); });
  EXPECT_LT(took, 100);
}

TEST(QueueControl, ShutdownWakesAWriterWaitingForAFreeChunk) {
  Pair p = make_pair_of_queues(/*max_chunks=*/2);
  p.writer->enqueue("a");
  p.writer->enqueue("b");  // the ring is full: the reader reads nothing
  const double took = cancel_after(*p.writer, milliseconds(300), [&] { p.writer->enqueue("c"); });
  EXPECT_LT(took, 100);
  EXPECT_THROW(p.writer->enqueue("d"), DistributedError);
  EXPECT_EQ(p.reader->dequeue(), "a") << "the peer is not affected";
}

TEST(QueueControl, IndefiniteDequeueWritesNoLongWaitLines) {
  Pair p = make_pair_of_queues();
  const LogLevel level = log_level();
  set_log_level(LogLevel::Info);
  p.reader->set_warning_interval(milliseconds(40));
  EXPECT_EQ(p.reader->warning_interval(), milliseconds(40));
  ::testing::internal::CaptureStderr();
  EXPECT_THROW(p.reader->dequeue(milliseconds(300), /*indefinite=*/true), TimeoutError);
  const std::string quiet = ::testing::internal::GetCapturedStderr();
  ::testing::internal::CaptureStderr();
  EXPECT_THROW(p.reader->dequeue(milliseconds(300)), TimeoutError);
  const std::string noisy = ::testing::internal::GetCapturedStderr();
  set_log_level(level);
  EXPECT_EQ(quiet.find("has waited"), std::string::npos) << quiet;
  EXPECT_NE(noisy.find("has waited"), std::string::npos) << "no long-wait line at 40 ms";
  EXPECT_THROW(p.reader->set_warning_interval(milliseconds(0)), std::invalid_argument);
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
