// The ring-buffer flag protocol (src/shm/ring_*.h) in one process: a writer thread and reader
// threads, each with its own mapping of the segment, as separate processes would have. Plus the
// shared-memory segment, the layout and the backoff wait on their own.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/deadline.h"
#include "core/shared_memory.h"
#include "groupcoord/errors.h"
#include "shm/attach_verdict.h"
#include "shm/queue_handle.h"
#include "shm/ring_buffer.h"
#include "shm/ring_reader.h"
#include "shm/ring_writer.h"

namespace groupcoord {
namespace testing {
namespace {

using shm::Deadline;
using shm::RingReader;
using shm::RingWriter;
using shm::ShmRingBuffer;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

/// A segment name no other test or process uses.
std::string fresh_name(const char* tag) {
  static std::atomic<int> counter{0};
  return "/gcmq-test-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(counter++);
}

bool exists_in_dev_shm(const std::string& name) {
  return ::access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

long long since_ms(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

constexpr std::uint64_t kToken = 0x1234abcd5678ef90ULL;

using QueueHandleBytes = std::array<unsigned char, sizeof(shm::QueueHandle)>;

/// A created ring plus a separate mapping per reader (attached by name, as a process would).
struct TestRing {
  TestRing(std::size_t n_reader, std::size_t chunk_bytes, std::size_t chunks)
      : name(fresh_name("ring")),
        writer_ring(ShmRingBuffer::create(name, n_reader, chunk_bytes, chunks, kToken)) {
    for (std::size_t r = 0; r < n_reader; ++r) {
      auto attached = ShmRingBuffer::attach(name, n_reader, chunk_bytes, chunks, kToken);
      if (!attached.ring) throw std::runtime_error("attach failed: " + attached.error);
      reader_rings.push_back(std::move(attached.ring));
    }
    writer_ring->segment().unlink();
  }
  std::string name;
  std::unique_ptr<ShmRingBuffer> writer_ring;
  std::vector<std::unique_ptr<ShmRingBuffer>> reader_rings;
};

/// Message i as one chunk: its index, then bytes that depend on (i, position).
void fill(std::uint8_t* chunk, std::size_t chunk_bytes, std::uint64_t i) {
  std::memcpy(chunk, &i, sizeof i);
  for (std::size_t j = sizeof i; j < chunk_bytes; ++j) {
    chunk[j] = static_cast<std::uint8_t>((i * 131 + j * 7) & 0xff);
  }
}

bool intact(const std::uint8_t* chunk, std::size_t chunk_bytes, std::uint64_t i) {
  std::uint64_t seen;
  std::memcpy(&seen, chunk, sizeof seen);
  if (seen != i) return false;
  for (std::size_t j = sizeof i; j < chunk_bytes; ++j) {
    if (chunk[j] != static_cast<std::uint8_t>((i * 131 + j * 7) & 0xff)) return false;
  }
  return true;
}

// Many messages through a 4-chunk ring to 3 readers of different speeds. Every reader gets every
// message in order and intact, and the writer never gets a chunk before every reader has
// consumed what was there (checked with counters the readers bump before releasing a chunk).
TEST(RingThreads, OrderedIntactAndNeverOverwritten) {
  const std::size_t readers = 3, chunks = 4, chunk_bytes = 256, n = 4000;
  TestRing ring(readers, chunk_bytes, chunks);
  std::vector<std::atomic<std::uint64_t>> consumed(readers);
  std::atomic<int> overwrites{0}, corrupt{0}, out_of_order{0};

  std::thread writer_thread([&] {
    RingWriter writer(*ring.writer_ring, "test ring", {});
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint8_t* chunk = writer.acquire(Deadline(milliseconds(30000)), "enqueue");
      for (std::size_t r = 0; r < readers; ++r) {
        // Message i reuses the chunk of message i - chunks: everyone must be past that one.
        if (i >= chunks && consumed[r].load(std::memory_order_relaxed) < i - chunks + 1) {
          ++overwrites;
        }
      }
      fill(chunk, chunk_bytes, i);
      writer.publish();
    }
  });
  std::vector<std::thread> reader_threads;
  for (std::size_t r = 0; r < readers; ++r) {
    reader_threads.emplace_back([&, r] {
      RingReader reader(*ring.reader_rings[r], r, "test ring", "writer");
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint8_t* chunk = reader.acquire(Deadline(milliseconds(30000)), "dequeue");
        std::uint64_t seen;
        std::memcpy(&seen, chunk, sizeof seen);
        if (seen != i) ++out_of_order;
        if (!intact(chunk, chunk_bytes, i)) ++corrupt;
        consumed[r].fetch_add(1, std::memory_order_relaxed);  // before the release below
        reader.release();
        // Reader r pauses now and then, so the ring is sometimes full and sometimes empty.
        if (i % (250 * (r + 1)) == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  writer_thread.join();
  for (auto& t : reader_threads) t.join();
  EXPECT_EQ(overwrites.load(), 0);
  EXPECT_EQ(out_of_order.load(), 0);
  EXPECT_EQ(corrupt.load(), 0);
  for (std::size_t r = 0; r < readers; ++r) EXPECT_EQ(consumed[r].load(), n);
}

// A reader blocked on an empty ring wakes up when the writer publishes (after its backoff has
// reached the sleeping phase).
TEST(RingThreads, WaitingReaderWakesOnPublish) {
  TestRing ring(1, 64, 2);
  std::atomic<bool> got{false};
  std::thread reader_thread([&] {
    RingReader reader(*ring.reader_rings[0], 0, "test ring", "writer");
    const std::uint8_t* chunk = reader.acquire(Deadline(milliseconds(10000)), "dequeue");
    got = intact(chunk, 64, 42);
    reader.release();
  });
  std::this_thread::sleep_for(milliseconds(50));
  RingWriter writer(*ring.writer_ring, "test ring", {});
  fill(writer.acquire(Deadline(milliseconds(0)), "enqueue"), 64, 42);
  writer.publish();
  reader_thread.join();
  EXPECT_TRUE(got.load());
}

// vLLM's dequeue(timeout): nothing written means TimeoutError after the timeout; a zero
// timeout raises at once; the message names the queue and what it waited for.
TEST(RingThreads, ReaderTimesOutOnEmptyRing) {
  TestRing ring(1, 64, 2);
  RingReader reader(*ring.reader_rings[0], 0, "queue Q", "rank 7");
  const auto start = Clock::now();
  try {
    reader.acquire(Deadline(milliseconds(30)), "dequeue");
    ADD_FAILURE() << "acquire on an empty ring returned";
  } catch (const TimeoutError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("queue Q"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 7"), std::string::npos) << what;
  }
  EXPECT_GE(since_ms(start), 30);
  const auto zero = Clock::now();
  EXPECT_THROW(reader.acquire(Deadline(milliseconds(0)), "dequeue"), TimeoutError);
  EXPECT_LT(since_ms(zero), 1000);
}

// A full ring makes the writer time out, naming the reader that holds it back and only that one.
TEST(RingThreads, WriterTimesOutNamingTheLaggard) {
  TestRing ring(2, 64, 2);
  RingWriter writer(*ring.writer_ring, "queue Q", {"fast reader", "slow reader"});
  RingReader fast(*ring.reader_rings[0], 0, "queue Q", "writer");
  for (std::uint64_t i = 0; i < 2; ++i) {
    fill(writer.acquire(Deadline(milliseconds(0)), "enqueue"), 64, i);
    writer.publish();
    EXPECT_TRUE(intact(fast.acquire(Deadline(milliseconds(0)), "dequeue"), 64, i));
    fast.release();
  }
  EXPECT_FALSE(writer.is_free());
  try {
    writer.acquire(Deadline(milliseconds(30)), "enqueue");
    ADD_FAILURE() << "acquire on a full ring returned";
  } catch (const TimeoutError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("slow reader"), std::string::npos) << what;
    EXPECT_EQ(what.find("fast reader"), std::string::npos) << what;
  }
  // Once the slow reader catches up, the writer may go on; the fast one just waits.
  RingReader slow(*ring.reader_rings[1], 1, "queue Q", "writer");
  EXPECT_TRUE(intact(slow.acquire(Deadline(milliseconds(0)), "dequeue"), 64, 0));
  slow.release();
  EXPECT_TRUE(writer.is_free());
  EXPECT_FALSE(fast.is_readable());
}

// A closed writer: readers read what was published, then get DistributedError at once.
TEST(RingThreads, ClosedWriterIsSeenAfterTheLastMessage) {
  TestRing ring(1, 64, 4);
  RingWriter writer(*ring.writer_ring, "queue Q", {});
  for (std::uint64_t i = 0; i < 2; ++i) {
    fill(writer.acquire(Deadline(milliseconds(0)), "enqueue"), 64, i);
    writer.publish();
  }
  ring.writer_ring->header().writer_state.value.store(
      static_cast<std::uint32_t>(shm::WriterState::kClosed), std::memory_order_release);
  RingReader reader(*ring.reader_rings[0], 0, "queue Q", "writer");
  for (std::uint64_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(intact(reader.acquire(Deadline(milliseconds(0)), "dequeue"), 64, i));
    reader.release();
  }
  const auto start = Clock::now();
  try {
    reader.acquire(Deadline(milliseconds(10000)), "dequeue");
    ADD_FAILURE() << "acquire after the writer closed returned";
  } catch (const TimeoutError& error) {
    ADD_FAILURE() << "timed out instead: " << error.what();
  } catch (const DistributedError& error) {
    EXPECT_NE(std::string(error.what()).find("closed"), std::string::npos) << error.what();
  }
  EXPECT_LT(since_ms(start), 1000);
}

// A closed reader: the writer fails at once when it needs a chunk that reader never read.
TEST(RingThreads, ClosedReaderFailsTheWriter) {
  TestRing ring(2, 64, 2);
  RingWriter writer(*ring.writer_ring, "queue Q", {"reader A", "reader B"});
  for (std::uint64_t i = 0; i < 2; ++i) {
    fill(writer.acquire(Deadline(milliseconds(0)), "enqueue"), 64, i);
    writer.publish();
  }
  ring.reader_rings[1]->reader_state(1).store(static_cast<std::uint32_t>(shm::ReaderState::kClosed),
                                              std::memory_order_release);
  try {
    writer.acquire(Deadline(milliseconds(10000)), "enqueue");
    ADD_FAILURE() << "acquire past a closed reader returned";
  } catch (const TimeoutError& error) {
    ADD_FAILURE() << "timed out instead: " << error.what();
  } catch (const DistributedError& error) {
    EXPECT_NE(std::string(error.what()).find("reader B closed"), std::string::npos) << error.what();
  }
}

/// The pid of a process that has certainly exited (a child that was reaped).
std::int32_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return static_cast<std::int32_t>(child);
}

// A writer process that died (no chance to mark its queue closed) fails a waiting reader well
// before the reader's deadline.
TEST(RingThreads, DeadWriterFailsReaders) {
  TestRing ring(1, 64, 2);
  ring.writer_ring->header().writer_pid = dead_pid();
  RingReader reader(*ring.reader_rings[0], 0, "queue Q", "rank 0");
  const auto start = Clock::now();
  try {
    reader.acquire(Deadline(milliseconds(10000)), "dequeue");
    ADD_FAILURE() << "acquire from a dead writer returned";
  } catch (const TimeoutError& error) {
    ADD_FAILURE() << "timed out instead: " << error.what();
  } catch (const DistributedError& error) {
    EXPECT_NE(std::string(error.what()).find("died"), std::string::npos) << error.what();
  }
  EXPECT_LT(since_ms(start), 3000);
}

// Likewise a reader process that died before reading what the writer needs to reuse.
TEST(RingThreads, DeadReaderFailsWriter) {
  TestRing ring(2, 64, 1);
  RingWriter writer(*ring.writer_ring, "queue Q", {"reader A", "reader B"});
  fill(writer.acquire(Deadline(milliseconds(0)), "enqueue"), 64, 0);
  writer.publish();
  RingReader a(*ring.reader_rings[0], 0, "queue Q", "writer");
  a.acquire(Deadline(milliseconds(0)), "dequeue");
  a.release();
  ring.reader_rings[1]->reader_slot(1).pid.store(dead_pid());
  const auto start = Clock::now();
  try {
    writer.acquire(Deadline(milliseconds(10000)), "enqueue");
    ADD_FAILURE() << "acquire past a dead reader returned";
  } catch (const TimeoutError& error) {
    ADD_FAILURE() << "timed out instead: " << error.what();
  } catch (const DistributedError& error) {
    EXPECT_NE(std::string(error.what()).find("reader B (pid"), std::string::npos) << error.what();
  }
  EXPECT_LT(since_ms(start), 3000);
}

// wait_free(count) looks `count` chunks ahead: a partly full ring has room for fewer.
TEST(RingThreads, WaitFreeLooksAhead) {
  TestRing ring(1, 64, 3);
  RingWriter writer(*ring.writer_ring, "queue Q", {});
  fill(writer.acquire(Deadline(milliseconds(0)), "enqueue"), 64, 0);
  writer.publish();
  EXPECT_NO_THROW(writer.wait_free(2, Deadline(milliseconds(0)), "enqueue"));
  EXPECT_THROW(writer.wait_free(3, Deadline(milliseconds(0)), "enqueue"), TimeoutError);
}

TEST(SharedMemory, CreateOpenUnlink) {
  const std::string name = fresh_name("seg");
  auto owner = shm::SharedMemory::create(name, 4096);
  EXPECT_TRUE(exists_in_dev_shm(name));
  EXPECT_THROW(shm::SharedMemory::create(name, 4096), DistributedError);  // exists already
  auto opened = shm::SharedMemory::open(name, 4096);
  ASSERT_TRUE(opened.segment) << opened.error;
  static_cast<char*>(owner->data())[100] = 'x';
  EXPECT_EQ(static_cast<char*>(opened.segment->data())[100], 'x');  // one memory, two mappings
  EXPECT_FALSE(shm::SharedMemory::open(name, 8192).segment);        // too small
  owner->unlink();
  EXPECT_FALSE(exists_in_dev_shm(name));
  static_cast<char*>(opened.segment->data())[200] = 'y';  // mappings outlive the name
  EXPECT_EQ(static_cast<char*>(owner->data())[200], 'y');
  auto gone = shm::SharedMemory::open(name, 1);
  EXPECT_FALSE(gone.segment);
  EXPECT_TRUE(gone.not_found);
}

TEST(SharedMemory, CreatorUnlinksOnDestruction) {
  const std::string name = fresh_name("seg");
  { auto owner = shm::SharedMemory::create(name, 100); }
  EXPECT_FALSE(exists_in_dev_shm(name));
  EXPECT_THROW(shm::SharedMemory::create("no-slash", 100), std::invalid_argument);
  EXPECT_THROW(shm::SharedMemory::create("/a/b", 100), std::invalid_argument);
}

TEST(ShmRingBuffer, AttachChecksTheHandle) {
  const std::string name = fresh_name("ring");
  auto ring = ShmRingBuffer::create(name, 2, 128, 3, kToken);
  auto wrong_token = ShmRingBuffer::attach(name, 2, 128, 3, kToken + 1);
  EXPECT_FALSE(wrong_token.ring);
  EXPECT_FALSE(wrong_token.not_found);
  auto wrong_size = ShmRingBuffer::attach(name, 2, 64, 3, kToken);
  EXPECT_FALSE(wrong_size.ring);
  auto good = ShmRingBuffer::attach(name, 2, 128, 3, kToken);
  ASSERT_TRUE(good.ring) << good.error;
  EXPECT_EQ(good.ring->n_reader(), 2u);
  auto missing = ShmRingBuffer::attach(fresh_name("none"), 2, 128, 3, kToken);
  EXPECT_TRUE(missing.not_found);
  // The writer of another build (another layout version): refused, and said so.
  const std::uint32_t version = ring->header().version;
  ring->header().version = version + 1;
  auto other_build = ShmRingBuffer::attach(name, 2, 128, 3, kToken);
  EXPECT_FALSE(other_build.ring);
  EXPECT_NE(other_build.error.find("has ring layout version " + std::to_string(version + 1) +
                                   ", this reader reads version " + std::to_string(version) +
                                   ": the ranks run different groupcoord builds"),
            std::string::npos)
      << other_build.error;
}

TEST(RingLayout, BlocksAreAlignedAndOverflowIsInvalid) {
  const auto layout = shm::RingLayout::compute(3, 100, 5);
  EXPECT_EQ(layout.chunk_stride, 128u);
  EXPECT_EQ(layout.reader_slots % 64, 0u);
  EXPECT_EQ(layout.flags % 64, 0u);
  EXPECT_EQ(layout.chunks % 64, 0u);
  EXPECT_EQ(layout.total, layout.chunks + 5 * 128);
  EXPECT_THROW(shm::RingLayout::compute(1, std::size_t{1} << 62, std::size_t{1} << 20),
               std::invalid_argument);
}

// Remote readers cannot be staged on one machine, so the verdict logic is checked on its own:
// the worst report per rank wins, and a rank that cannot see the segment is an argument error
// naming the group and the ranks; other failures are DistributedError.
TEST(AttachVerdict, RemoteReadersAreInvalidArgumentFailuresAreDistributedError) {
  using shm::kAttachFailed;
  using shm::kAttachOk;
  using shm::kAttachRemote;
  // Three ranks; rank 0 writes. Rank 2 reports itself remote; rank 0 saw nothing wrong.
  const std::vector<std::int32_t> reports = {kAttachOk, kAttachOk, kAttachOk,
                                             kAttachOk, kAttachOk, kAttachOk,
                                             kAttachOk, kAttachOk, kAttachRemote};
  const auto verdict = shm::combine_statuses(reports, 3);
  EXPECT_EQ(verdict, (std::vector<std::int32_t>{kAttachOk, kAttachOk, kAttachRemote}));
  try {
    shm::raise_on_failure("create_from_process_group", "tp:0", verdict, "writer", 0, "");
    ADD_FAILURE() << "no error for a remote reader";
  } catch (const std::invalid_argument& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("tp:0"), std::string::npos) << what;
    EXPECT_NE(what.find("group rank(s) 2"), std::string::npos) << what;
    EXPECT_NE(what.find("serves readers on other nodes"), std::string::npos) << what;
  }
  // Where the caller serves remote readers over TCP, a remote reader is no error.
  EXPECT_NO_THROW(shm::raise_on_failure("create_from_process_group", "tp:0", verdict, "writer", 0,
                                        "", /*remote_allowed=*/true));
  try {
    shm::raise_on_failure("create_from_process_group", "tp:0", {kAttachFailed, kAttachOk}, "writer",
                          0, "No space left on device");
    ADD_FAILURE() << "no error for a failed writer";
  } catch (const std::invalid_argument& error) {
    ADD_FAILURE() << "wrong type: " << error.what();
  } catch (const DistributedError& error) {
    EXPECT_NE(std::string(error.what()).find("No space left"), std::string::npos) << error.what();
  }
  EXPECT_NO_THROW(shm::raise_on_failure("x", "g", {kAttachOk, kAttachOk}, "writer", 0, ""));
}

TEST(QueueHandle, RoundTripsAndRejectsGarbage) {
  const auto handle = shm::ok_handle("/gcmq-x", 3, 4096, 6, 77);
  QueueHandleBytes bytes;
  std::memcpy(bytes.data(), &handle, sizeof handle);
  shm::QueueHandle copy;
  std::memcpy(&copy, bytes.data(), sizeof copy);
  EXPECT_TRUE(shm::handle_is_valid(copy));
  EXPECT_STREQ(copy.name, "/gcmq-x");
  EXPECT_EQ(copy.token, 77u);
  shm::QueueHandle zeros{};
  EXPECT_FALSE(shm::handle_is_valid(zeros));
  const auto failed = shm::failed_handle(std::string(1000, 'e'));  // truncated, terminated
  EXPECT_TRUE(shm::handle_is_valid(failed));
  EXPECT_EQ(failed.status, shm::kAttachFailed);
  EXPECT_EQ(std::string(failed.error).size(), sizeof failed.error - 1);
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
