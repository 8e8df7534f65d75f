// MessageQueue's private state, shared by the queue's operations and the collective factories
// that build it (both in message_queue.cc).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "groupcoord/bytes.h"
#include "groupcoord/message_queue.h"
#include "shm/remote_fanout.h"
#include "shm/remote_inbox.h"
#include "shm/ring_buffer.h"
#include "shm/ring_reader.h"
#include "shm/ring_writer.h"

namespace groupcoord {
namespace shm {

/// A multi-chunk message a reader has started to reassemble (kept across a dequeue timeout).
/// At namespace scope: clang cannot use the default member initializers of a class nested in
/// the one whose std::optional member names it.
struct PartialMessage {
  Bytes data;
  std::uint64_t size_word = 0;  ///< ChunkHeader::total_bytes of its chunks (flag bit included)
  std::uint32_t count = 0;
  std::uint32_t next = 0;  ///< index of the next chunk expected
};

}  // namespace shm

struct MessageQueue::Impl {
  using Partial = shm::PartialMessage;

  std::string name;     ///< for errors, e.g. "mq[tp:0, writer 0]"
  int writer_rank = 0;  ///< -1: the writer belongs to no group (create(), external writers)
  std::vector<int> reader_ranks;
  int reader_index = -1;  ///< -1 on the writer
  std::size_t max_chunk_bytes = 0;
  std::size_t max_chunks = 0;
  std::chrono::milliseconds timeout{0};
  std::string shm_name;
  std::unique_ptr<shm::ShmRingBuffer> ring;  ///< null when the queue has no readers
  std::unique_ptr<shm::RingWriter> writer;   ///< set on the writer (with a ring)
  std::unique_ptr<shm::RingReader> reader;   ///< set on a reader of the ring
  /// Writer: the connections to the readers on other nodes (null when there are none).
  std::unique_ptr<shm::RemoteFanout> fanout;
  /// A reader on another node than the writer: its connection (then `ring` is null).
  std::unique_ptr<shm::RemoteInbox> inbox;
  /// Readers that share the writer's memory (vLLM's n_local_reader).
  std::size_t n_local_reader = 0;
  bool ready = false;  ///< wait_until_ready() completed
  /// Set by shutdown() (any thread): every wait of this process's side throws "cancelled".
  std::atomic<bool> cancelled{false};
  /// Interval of the long-wait log lines (GROUPCOORD_RINGBUFFER_WARNING_INTERVAL, seconds;
  /// set_warning_interval()).
  std::chrono::milliseconds warn_every = default_warning_interval();
  bool broken = false;  ///< writer: a message was left half-written
  std::optional<Partial> partial;
  /// What export_handle() returns: set for create() and create_from_handle() queues only (the
  /// segment name of a collectively made queue is gone by the time it is returned).
  std::optional<MessageQueue::Handle> handle;

  bool is_writer() const { return reader_index < 0; }
  /// What the ring's waits of one call need: the cancel flag and the warning interval (none
  /// when `quiet`).
  shm::WaitOptions wait_options(bool quiet = false) const {
    return {&cancelled, quiet ? std::chrono::milliseconds(0) : warn_every};
  }
  /// Throws "cancelled" once shutdown() was called.
  void check_not_cancelled(const char* op) const { wait_options().throw_if_cancelled(name, op); }
  /// GROUPCOORD_RINGBUFFER_WARNING_INTERVAL (seconds, as vLLM's VLLM_RINGBUFFER_WARNING_INTERVAL),
  /// else 60 s; std::invalid_argument naming the variable for anything but a positive number.
  static std::chrono::milliseconds default_warning_interval();
  /// "rank 3", or "the external writer (pid 42)" when the writer belongs to no group.
  std::string writer_label() const;
  /// dequeue()'s answer to a message enqueue_error sent: DistributedError carrying `why`.
  [[noreturn]] void throw_writer_failure(const Bytes& why) const;

  /// The writer's side. `ring` may be null (no readers). `fanout`: the connections to the
  /// readers on other nodes (null: none); their ring slots are never waited for.
  static std::unique_ptr<Impl> make_writer(std::string name, int writer_rank,
                                           std::vector<int> reader_ranks,
                                           std::size_t max_chunk_bytes, std::size_t max_chunks,
                                           std::chrono::milliseconds timeout,
                                           std::unique_ptr<shm::ShmRingBuffer> ring,
                                           std::unique_ptr<shm::RemoteFanout> fanout = nullptr);
  /// Reader `reader_index`'s side when it is on another node than the writer.
  static std::unique_ptr<Impl> make_remote_reader(
      std::string name, int writer_rank, std::vector<int> reader_ranks, int reader_index,
      std::size_t n_local_reader, std::size_t max_chunk_bytes, std::size_t max_chunks,
      std::chrono::milliseconds timeout, std::unique_ptr<shm::RemoteInbox> inbox);
  /// Reader `reader_index`'s side of an attached ring; announces the attachment in the segment.
  /// `handle`: the handle it was attached from (create_from_handle and external writers).
  static std::unique_ptr<Impl> make_reader(
      std::string name, int writer_rank, std::vector<int> reader_ranks, int reader_index,
      std::chrono::milliseconds timeout, std::unique_ptr<shm::ShmRingBuffer> ring,
      std::optional<MessageQueue::Handle> handle = std::nullopt);
};

}  // namespace groupcoord
