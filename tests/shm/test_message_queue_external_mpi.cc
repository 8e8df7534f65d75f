// MessageQueue with a writer outside the readers' group (vLLM's external_writer_handle,
// export_handle and create_from_handle): run by ctest under `mpirun -np N` (N = 1, 2, 4).
// The "external" writer is a queue made with MessageQueue::create() in one rank's process (on a
// thread of its own where that rank also reads); its handle travels as bytes through the test
// store, as it would through a pipe between an engine and its workers. Messages are pure
// functions of (stream, index) (message_reference.h): each reader checks its own copy.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <optional>
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
using Handle = MessageQueue::Handle;

// Short enough that a broken test fails well within the harness's deadline.
constexpr milliseconds kTimeout(30000);

bool exists_in_dev_shm(const std::string& shm_name) {
  return ::access(("/dev/shm" + shm_name).c_str(), F_OK) == 0;
}

std::vector<int> range(int begin, int end) {
  std::vector<int> out;
  for (int r = begin; r < end; ++r) out.push_back(r);
  return out;
}

/// Runs `body` on a thread of its own; join() rethrows what it threw (gtest assertions only
/// work on the main thread, so the body throws instead).
class Background {
 public:
  template <typename Fn>
  explicit Background(Fn body)
      : thread_([this, body] {
          try {
            body();
          } catch (...) {
            error_ = std::current_exception();
          }
        }) {}
  ~Background() {
    if (thread_.joinable()) thread_.join();
  }
  void join() {
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;
  std::thread thread_;
};

class ExternalWriterTest : public MultiProcessTest {
 protected:
  /// Rank `root` publishes `handle` (its bytes) under `key`; every rank returns the parsed copy.
  Handle share(const std::string& key, int root, const std::optional<Handle>& handle) {
    if (rank() == root) store()->set(key, handle->to_bytes());
    return Handle::from_bytes(store()->get(key));
  }

  static std::string message(std::size_t index, std::size_t chunk) {
    return reference_message(20, index, reference_size(20, index, 3 * chunk, chunk));
  }

  /// Every message of `count` as reader `q` receives it.
  static void expect_messages(MessageQueue& q, std::size_t count, std::size_t chunk) {
    for (std::size_t i = 0; i < count; ++i) {
      const Bytes got = q.dequeue();
      ASSERT_TRUE(got == message(i, chunk)) << "message " << i << " differs";
    }
  }
};

Handle sample_handle() {
  Handle h;
  h.reader_ranks = {3, 0, 7};
  h.shm_name = "/gcmq-test-handle";
  h.max_chunk_bytes = 4096;
  h.max_chunks = 5;
  h.token = 0x0123456789abcdefULL;
  h.writer_pid = 4242;
  return h;
}

// The byte form is exact (the same handle comes back) and strict: anything else raises
// std::invalid_argument instead of attaching to garbage.
TEST_F(ExternalWriterTest, HandleBytesRoundTripAndRejectGarbage) {
  const Handle h = sample_handle();
  const Bytes bytes = h.to_bytes();
  EXPECT_EQ(bytes.size(), 48u + h.shm_name.size() + 4 * h.reader_ranks.size());
  EXPECT_EQ(bytes.substr(0, 8), "GCMQHDL1");
  EXPECT_TRUE(Handle::from_bytes(bytes) == h);

  auto rejected = [](const Bytes& b, const std::string& needle) {
    try {
      Handle::from_bytes(b);
      ADD_FAILURE() << "accepted; expected an error mentioning '" << needle << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  rejected("", "too short");
  rejected(bytes.substr(0, bytes.size() - 1), "bytes, expected");
  rejected(bytes + "x", "bytes, expected");
  Bytes wrong_magic = bytes;
  wrong_magic[0] = 'X';
  rejected(wrong_magic, "magic");
  Bytes wrong_version = bytes;
  wrong_version[8] = 9;
  rejected(wrong_version, "version");
  auto with = [&](auto change) {
    Handle other = h;
    change(other);
    return other.to_bytes();
  };
  rejected(with([](Handle& o) { o.reader_ranks = {1, 1}; }), "appears twice");
  rejected(with([](Handle& o) { o.reader_ranks = {-2}; }), "negative");
  rejected(with([](Handle& o) { o.reader_ranks.clear(); }), "no readers");
  rejected(with([](Handle& o) { o.shm_name = "/a/b"; }), "segment name");
  rejected(with([](Handle& o) { o.shm_name = "noslash"; }), "segment name");
  rejected(with([](Handle& o) { o.max_chunks = 0; }), "max_chunks");
  rejected(with([](Handle& o) { o.max_chunk_bytes = 16; }), "max_chunk_bytes");
}

// A queue made outside any group, read by the other ranks through its handle: readers attach
// from the bytes, the segment's name disappears once the last of them attached, messages of
// every size (several chunks, larger than the ring) arrive in order, and the writer going away
// lets the readers drain what was published, then fail at once.
TEST_F(ExternalWriterTest, WriterOutsideTheGroupFeedsTheOtherRanks) {
  if (world_size() == 1) GTEST_SKIP() << "needs a reader process";
  const std::size_t chunk = 1024, chunks = 4, n = 200;
  const int n_reader = world_size() - 1;
  std::unique_ptr<MessageQueue> writer;
  if (rank() == 0) {
    writer = MessageQueue::create(n_reader, chunk, chunks, range(1, world_size()), kTimeout);
    EXPECT_TRUE(writer->is_writer());
    EXPECT_EQ(writer->writer_rank(), -1);
    EXPECT_EQ(writer->num_readers(), n_reader);
    EXPECT_TRUE(exists_in_dev_shm(writer->shm_name())) << "no reader attached yet";
  }
  const Handle handle =
      share("handle", 0, writer ? std::optional<Handle>(writer->export_handle()) : std::nullopt);
  EXPECT_EQ(handle.reader_ranks, range(1, world_size()));
  EXPECT_EQ(handle.max_chunk_bytes, chunk);

  std::unique_ptr<MessageQueue> reader;
  if (rank() != 0) {
    reader = MessageQueue::create_from_handle(handle, rank(), kTimeout);
    EXPECT_TRUE(reader->is_reader());
    EXPECT_EQ(reader->writer_rank(), -1);
    EXPECT_EQ(reader->reader_index(), rank() - 1);
    EXPECT_EQ(reader->reader_ranks(), handle.reader_ranks);
    EXPECT_EQ(reader->max_chunk_bytes(), chunk);
    EXPECT_EQ(reader->default_timeout(), kTimeout);
    EXPECT_TRUE(reader->export_handle() == handle);
    EXPECT_NE(reader->name().find("external writer pid"), std::string::npos) << reader->name();
  }
  world()->barrier();  // every reader attached: the last one removed the name
  EXPECT_FALSE(exists_in_dev_shm(handle.shm_name)) << handle.shm_name << " still exists";

  if (writer) {
    writer->wait_until_ready();
    for (std::size_t i = 0; i < n; ++i) writer->enqueue(message(i, chunk));
    writer->enqueue(reference_message(21, 0, 10 * chunks * chunk));  // streams through the ring
    writer.reset();  // closed: readers drain, then fail instead of waiting
  } else {
    reader->wait_until_ready();
    expect_messages(*reader, n, chunk);
    EXPECT_TRUE(reader->dequeue() == reference_message(21, 0, 10 * chunks * chunk));
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(reader->dequeue(), DistributedError);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
  world()->barrier();
}

// vLLM's create_from_process_group(..., external_writer_handle=...): only the writer rank gets
// the handle; every rank of the group, the writer rank included, becomes a reader (here the
// writer itself runs on a thread of the writer rank's process). Blocking and not.
TEST_F(ExternalWriterTest, GroupOfReadersFromTheWriterRanksHandle) {
  const int w = world_size() - 1;  // not rank 0, to catch "writer_rank" mix-ups
  const std::size_t chunk = 2048, chunks = 4, n = 100;
  for (bool blocking : {false, true}) {
    std::unique_ptr<MessageQueue> writer;
    std::unique_ptr<Background> writing;
    std::optional<Handle> handle;
    if (rank() == w) {
      writer = MessageQueue::create(world_size(), chunk, chunks, {}, kTimeout);
      handle = writer->export_handle();
      // The external writer runs by itself, as another process would: handshake, then messages.
      MessageQueue* raw = writer.get();
      writing = std::make_unique<Background>([raw, chunk] {
        raw->wait_until_ready();
        for (std::size_t i = 0; i < n; ++i) raw->enqueue(message(i, chunk));
      });
    }
    // Other ranks pass a handle too (a stale one): only the writer rank's counts, as in vLLM.
    const std::optional<Handle> mine =
        rank() == w ? handle : std::optional<Handle>(sample_handle());
    auto mq = MessageQueue::create_from_process_group(world(), std::size_t{1} << 22, 6, w, mine,
                                                      blocking);
    EXPECT_TRUE(mq->is_reader());
    EXPECT_EQ(mq->writer_rank(), -1);
    EXPECT_EQ(mq->reader_index(), rank());
    EXPECT_EQ(mq->num_readers(), world_size());
    EXPECT_EQ(mq->max_chunk_bytes(), chunk) << "sizes come from the handle";
    EXPECT_EQ(mq->max_chunks(), chunks);
    EXPECT_FALSE(exists_in_dev_shm(mq->shm_name())) << "the group covers every reader";
    EXPECT_NE(mq->name().find(world()->name()), std::string::npos) << mq->name();
    if (!blocking) mq->wait_until_ready();
    expect_messages(*mq, n, chunk);
    if (writing) writing->join();
    world()->barrier();
  }
}

// Bad external handles make every rank raise the same std::invalid_argument before anything
// else happens, and the group stays usable.
TEST_F(ExternalWriterTest, BadExternalHandlesRaiseEverywhere) {
  const int w = 0;
  auto expect_invalid = [&](const std::optional<Handle>& h, const std::string& needle) {
    try {
      MessageQueue::create_from_process_group(world(), 1024, 4, w, rank() == w ? h : std::nullopt,
                                              false);
      ADD_FAILURE() << "no exception; expected one mentioning '" << needle << "'";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_NE(what.find("world"), std::string::npos) << what;  // names the group
    }
  };
  Handle no_readers = sample_handle();
  no_readers.reader_ranks.clear();
  expect_invalid(no_readers, "external_writer_handle");

  // A live queue whose handle leaves out the last group rank (a "remote" reader for vLLM).
  std::unique_ptr<MessageQueue> partial;
  if (rank() == w) partial = MessageQueue::create(1, 1024, 4, {world_size() == 1 ? 5 : 0});
  expect_invalid(partial ? std::optional<Handle>(partial->export_handle()) : std::nullopt,
                 "not among the external writer's reader ranks");

  // A writer that is gone: its segment no longer exists on this node.
  std::optional<Handle> gone;
  if (rank() == w) gone = MessageQueue::create(world_size(), 1024, 4)->export_handle();
  expect_invalid(gone, "cannot open the shared memory of the external writer");

  // Still in step: a normal queue works.
  auto good = MessageQueue::create_from_process_group(world(), 1024, 4, w, std::nullopt, true);
  const std::string expected = reference_message(22, 0, 3000);
  EXPECT_EQ(good->broadcast_object(rank() == w ? std::optional<Bytes>(expected) : std::nullopt),
            expected);
  world()->barrier();
}

// create() / create_from_handle() argument checks, local to each process.
TEST_F(ExternalWriterTest, LocalArgumentChecks) {
  EXPECT_THROW(MessageQueue::create(2, 1024, 4, {1}), std::invalid_argument);
  EXPECT_THROW(MessageQueue::create(2, 1024, 4, {1, 1}), std::invalid_argument);
  EXPECT_THROW(MessageQueue::create(1, 16, 4), std::invalid_argument);
  EXPECT_THROW(MessageQueue::create(1, 1024, 0), std::invalid_argument);
  EXPECT_THROW(MessageQueue::create(1, 1024, 4, {}, milliseconds(-1)), std::invalid_argument);

  auto none = MessageQueue::create(0, 1024, 4);  // vLLM: a writer without readers is a no-op
  EXPECT_EQ(none->num_readers(), 0);
  EXPECT_NO_THROW(none->enqueue("nobody", milliseconds(0)));
  EXPECT_THROW(none->export_handle(), std::invalid_argument);

  auto writer = MessageQueue::create(2, 1024, 4, {10, 20});
  const Handle handle = writer->export_handle();
  EXPECT_EQ(handle.writer_pid, static_cast<std::int32_t>(::getpid()));
  EXPECT_THROW(writer->dequeue(milliseconds(0)), std::invalid_argument);
  try {
    MessageQueue::create_from_handle(handle, 30);
    ADD_FAILURE() << "rank 30 is not a reader of the handle";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[10, 20]"), std::string::npos) << e.what();
  }
  auto first = MessageQueue::create_from_handle(handle, 20);
  EXPECT_EQ(first->reader_index(), 1);
  EXPECT_THROW(first->enqueue("x"), std::invalid_argument);
  EXPECT_THROW(MessageQueue::create_from_handle(handle, 20), std::invalid_argument)
      << "the same reader attached twice";
  EXPECT_TRUE(exists_in_dev_shm(handle.shm_name)) << "reader 10 has not attached yet";
  auto second = MessageQueue::create_from_handle(Handle::from_bytes(handle.to_bytes()), 10);
  EXPECT_FALSE(exists_in_dev_shm(handle.shm_name)) << "every reader attached";

  // Both readers in this process see what the writer publishes (all fits in the ring).
  writer->enqueue("hello");
  writer->enqueue(reference_message(23, 0, 2500));  // 3 chunks
  for (MessageQueue* q : {first.get(), second.get()}) {
    EXPECT_EQ(q->dequeue(milliseconds(1000)), "hello");
    EXPECT_TRUE(q->dequeue(milliseconds(1000)) == reference_message(23, 0, 2500));
    EXPECT_THROW(q->dequeue(milliseconds(0)), TimeoutError);
  }
  // A group-made queue has no handle to export (its name is gone already).
  auto grouped = MessageQueue::create_from_process_group(world(), 1024, 2, 0);
  if (world_size() > 1) EXPECT_THROW(grouped->export_handle(), std::invalid_argument);
  world()->barrier();
}

// A writer destroyed before anyone attached leaves nothing behind; a writer and a reader in one
// process complete the readiness handshake (each side waits for the other), and afterwards the
// name is gone (the reader removed it on attaching, the writer's handshake would have).
TEST_F(ExternalWriterTest, NameRemovalAndHandshakeInOneProcess) {
  {
    auto writer = MessageQueue::create(1, 1024, 2);
    const std::string name = writer->shm_name();
    EXPECT_TRUE(exists_in_dev_shm(name));
    writer.reset();
    EXPECT_FALSE(exists_in_dev_shm(name));
  }
  auto writer = MessageQueue::create(1, 1024, 2, {0});
  auto reader = MessageQueue::create_from_handle(writer->export_handle(), 0);
  Background ready([&] { reader->wait_until_ready(milliseconds(10000)); });
  writer->wait_until_ready(milliseconds(10000));
  ready.join();
  EXPECT_FALSE(exists_in_dev_shm(writer->shm_name()));
}

// Last: no test left a segment behind in /dev/shm (the names carry the writer's pid).
TEST_F(ExternalWriterTest, NoSegmentLeftInDevShm) { expect_no_queue_segments_left(world()); }

}  // namespace
}  // namespace testing
}  // namespace groupcoord
