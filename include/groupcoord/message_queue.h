// MessageQueue: vLLM's shared-memory broadcaster (shm_broadcast.MessageQueue) for the processes
// of one node, without ZeroMQ. One writer enqueues byte strings (Python pickles) that every reader
// dequeues, in order, through a ring of `max_chunks` chunks of `max_chunk_bytes` in a POSIX
// shared-memory segment. It replaces a Gloo broadcast_object on the hot path of an engine
// (scheduler output to the workers): a message costs two memcpy and a few atomic flags.
//
// Differences from vLLM, on purpose:
//   * Messages larger than a chunk ("overflow") are split across consecutive chunks (each chunk
//     carries a small header: total size, chunk index, chunk count) instead of travelling over
//     a ZeroMQ socket. The ring then works as a pipe: readers copy chunks out while the writer
//     fills the next ones, so a message may even be larger than the whole ring. Keeping
//     everything in the segment keeps one ordering, one deadline and one failure model, needs no
//     extra socket or thread, and never uses the group's Gloo pair (whose collectives must stay
//     in lockstep on one thread and break the group on a timeout).
//   * Every wait has a deadline: `timeout` = std::nullopt means the queue's default timeout (the
//     group's timeout at creation, see set_default_timeout()), never "forever".
//   * Rank arguments (writer_rank, reader_rank) are ranks *in the group* for both factories
//     (vLLM's single-reader factory takes a global rank).
//   * Readers on other nodes (vLLM's remote readers, served over ZeroMQ there): a reader that
//     cannot open the writer's segment (another node, or another /dev/shm) is served over a TCP
//     connection of its own to a queue made by create_from_process_group (or the single-reader
//     factory): the writer listens on its address for peers (GLOO_SOCKET_IFNAME's interface,
//     else its host name's), the readers connect with a token the group hands out, and each
//     message goes as a length and the bytes after the ring's readers have it. Deadlines and
//     failures are the ring's: a dead writer or reader is an immediate DistributedError, a
//     dequeue that times out resumes its message; but an enqueue that times out on a stalled
//     remote reader breaks that connection. Same-node is decided by opening the segment, as
//     vLLM's in_the_same_node_as does, not by host names. External writers' readers must all
//     be on the writer's node (std::invalid_argument otherwise).
//   * External writers (vLLM's executor, which writes the workers' queue from outside their
//     group): create() makes a writer that belongs to no group, export_handle() describes its
//     queue as a Handle (serialisable with Handle::to_bytes()), and the readers attach with
//     create_from_handle() or collectively with create_from_process_group(...,
//     external_writer_handle, ...). The handle's name is removed from /dev/shm as soon as every
//     reader it lists has attached (or by the writer's wait_until_ready(), or its destructor).
//   * The segment's name is unlinked as soon as every reader has attached (inside the creating
//     call), so a crash later leaks no /dev/shm entry.
//   * A reader waiting on a writer that closed its queue (or broke it, see enqueue()), or whose
//     process died, raises DistributedError at once (a death within ~0.2 s); a writer waiting
//     for a reader that closed its queue or died likewise. vLLM waits (or spins) forever.
//
// Threading: a MessageQueue object is used by one thread at a time. Different queues are
// independent and may be used concurrently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "groupcoord/bytes.h"
#include "groupcoord/default_timeout.h"
#include "groupcoord/process_group.h"

namespace groupcoord {

/// One writer, many same-node readers, a shared-memory ring in between. See the file comment.
class MessageQueue {
 public:
  struct Impl;  ///< Private implementation (src/shm/message_queue_impl.h).

  /// Default of `timeout` for queues made outside a group (create(), create_from_handle()).
  static constexpr std::chrono::milliseconds kDefaultTimeout = kBuiltinTimeout;

  /// vLLM's Handle: what a reader needs to attach to a queue (its local readers only; remote
  /// readers are not supported). Plain data; to_bytes() / from_bytes() carry it between
  /// processes (a pipe, a store, a pickle) in a fixed little-endian layout.
  struct Handle {
    std::vector<int> reader_ranks;  ///< vLLM's local_reader_ranks: reader i attaches as rank [i]
    std::string shm_name;           ///< the segment's POSIX name ("/gcmq-...")
    std::size_t max_chunk_bytes = 0;
    std::size_t max_chunks = 0;
    std::uint64_t token = 0;      ///< random; the segment must carry it (guards against namesakes)
    std::int32_t writer_pid = 0;  ///< for messages

    /// The serialised handle (about 60 bytes plus the name and 4 bytes per reader).
    Bytes to_bytes() const;
    /// Parses to_bytes()'s output. Throws std::invalid_argument on anything else (wrong size,
    /// magic or version, a malformed name, duplicate or negative reader ranks, bad sizes).
    static Handle from_bytes(const Bytes& bytes);
    /// Throws std::invalid_argument, prefixed with `what`, unless the handle describes a ring a
    /// reader can attach to (at least one reader, unique ranks >= 0, a valid name and sizes).
    void validate(const std::string& what) const;
    bool operator==(const Handle& other) const;
    bool operator!=(const Handle& other) const { return !(*this == other); }
  };

  /// vLLM's MessageQueue(n_reader, n_local_reader, local_reader_ranks, max_chunk_bytes,
  /// max_chunks) constructor: a writer that belongs to no group (e.g. an engine's scheduler
  /// process feeding its workers), for `n_reader` readers on this node that attach later with
  /// create_from_handle(export_handle(), rank). `reader_ranks` (default 0 .. n_reader - 1) are
  /// the ranks the readers will announce, unique and >= 0. Not collective. n_reader = 0 makes a
  /// queue without ring whose enqueue() does nothing (as vLLM). `timeout` is default_timeout().
  /// Throws std::invalid_argument for bad sizes or ranks, DistributedError when the segment
  /// cannot be created (e.g. /dev/shm full).
  static std::unique_ptr<MessageQueue> create(
      std::size_t n_reader, std::size_t max_chunk_bytes, std::size_t max_chunks,
      std::vector<int> reader_ranks = {},
      std::chrono::milliseconds timeout = groupcoord::default_timeout());

  /// vLLM's export_handle(): the handle of a queue made by create() (to hand to its readers), or
  /// the one a reader was made from. Throws std::invalid_argument for queues made collectively
  /// (create_from_process_group*: their segment's name is already gone) and for a queue without
  /// readers.
  Handle export_handle() const;

  /// vLLM's create_from_handle(handle, rank): attaches this process as the reader announced as
  /// `rank` (its index in handle.reader_ranks). Not collective; the writer may be in any process
  /// of this node. When every reader of the handle has attached, the segment's name is removed.
  /// Throws std::invalid_argument for an invalid handle or a rank it does not list (remote
  /// readers are not supported), DistributedError when the segment does not exist (the writer is
  /// gone, or on another node) or does not match the handle.
  static std::unique_ptr<MessageQueue> create_from_handle(
      const Handle& handle, int rank,
      std::chrono::milliseconds timeout = groupcoord::default_timeout());

  /// Collective over every rank of `group` (same arguments everywhere, in the same order as the
  /// group's other collectives): group rank `writer_rank` creates the segment and sends its
  /// handle (name, sizes, a random token) with a Gloo broadcast; every other rank attaches as a
  /// reader; an all_gather of the outcome makes every rank agree, then every rank unlinks the
  /// name (the first one removes it), so that on return no rank can still see it in /dev/shm.
  /// With `blocking`, wait_until_ready() runs before returning. A group of one rank has no
  /// readers: enqueue() is then a no-op, as in vLLM.
  /// Throws std::invalid_argument for a null group, zero sizes, max_chunk_bytes too small for a
  /// chunk header (16 bytes) or writer_rank out of range (every rank throws); DistributedError
  /// when the segment cannot be created or attached, or the readers on other nodes cannot
  /// connect to the writer.
  static std::unique_ptr<MessageQueue> create_from_process_group(
      std::shared_ptr<ProcessGroup> group, std::size_t max_chunk_bytes, std::size_t max_chunks,
      int writer_rank = 0, bool blocking = true);

  /// vLLM's create_from_process_group(..., external_writer_handle, blocking): as above, except
  /// when group rank `writer_rank` passes an external writer's handle (the other ranks' value is
  /// ignored, as in vLLM: only the writer rank's decides). Then nobody in the group writes: the
  /// writer rank sends the handle to the others over the group, and every rank of the group,
  /// writer_rank included, attaches as a reader with create_from_handle(handle, group rank);
  /// max_chunk_bytes and max_chunks are taken from the handle. Every group rank must be among
  /// handle.reader_ranks. With `blocking`, wait_until_ready() runs, which needs the external
  /// writer to call its own wait_until_ready() meanwhile (vLLM's engine passes blocking=false and
  /// calls it later). Throws std::invalid_argument on every rank for an invalid handle, a group
  /// rank the handle does not list, or a segment not visible here (another node);
  /// DistributedError when attaching fails otherwise.
  static std::unique_ptr<MessageQueue> create_from_process_group(
      std::shared_ptr<ProcessGroup> group, std::size_t max_chunk_bytes, std::size_t max_chunks,
      int writer_rank, const std::optional<Handle>& external_writer_handle, bool blocking = true);

  /// Collective over every rank of `group`: vLLM's single-reader variant. Every rank except
  /// `reader_rank` (a rank in the group) is the writer of its own one-reader queue; their
  /// handles are gathered to `reader_rank`, which attaches to all of them. Returns, on a writer,
  /// one queue (its own); on the reader, one queue per writer in group-rank order (writer_rank()
  /// tells them apart), i.e. group size - 1 queues (none in a group of one). With `blocking`,
  /// wait_until_ready() runs on every returned queue before returning. Throws as
  /// create_from_process_group (reader_rank out of range); writers on another node than the
  /// reader serve it over TCP.
  static std::vector<std::unique_ptr<MessageQueue>> create_from_process_group_single_reader(
      std::shared_ptr<ProcessGroup> group, std::size_t max_chunk_bytes, std::size_t max_chunks,
      int reader_rank = 0, bool blocking = false);

  /// Writer: marks the queue closed (readers can still read what was published, then get
  /// DistributedError instead of waiting); reader: tells the writer it will read no more.
  /// Unmaps the segment. Never throws.
  ~MessageQueue();
  MessageQueue(const MessageQueue&) = delete;
  MessageQueue& operator=(const MessageQueue&) = delete;

  /// Readiness handshake through the segment (vLLM's wait_until_ready): the writer waits until
  /// every reader has attached (so one thread may make a writer and a reader of one handle and
  /// call the writer's wait_until_ready, then the reader's, as vLLM allows), each reader until
  /// the writer has called it. Every rank of the queue calls
  /// it once (create_* does when `blocking`); later calls return at once. Unlike vLLM's ZeroMQ
  /// handshake it is not required before the first message (the segment is attached at
  /// creation); it only synchronizes the processes. Throws TimeoutError at the deadline,
  /// DistributedError when a peer closed its queue.
  void wait_until_ready(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Writer only: appends `obj` (any size, 0 included). Waits while the ring is full, i.e. until
  /// the slowest reader has read the chunks it needs. Throws std::invalid_argument on a reader,
  /// TimeoutError when the readers did not free the chunks in time: before anything was written
  /// (always the case when the message fits in the ring) the queue stays usable; a message larger
  /// than the ring that times out half-written breaks the queue (readers then get
  /// DistributedError; later enqueues throw DistributedError). A timeout of zero never waits.
  void enqueue(const Bytes& obj, std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Writer only, beyond vLLM's API: what a writer sends instead of a message it cannot produce
  /// (its serializer threw). The readers' next dequeue() consumes it and throws SourceFailedError
  /// (errors.h) naming the writer and carrying `why`, at once rather than at its deadline; the
  /// queue stays usable. Waits and fails as enqueue() does.
  void enqueue_error(const std::string& why,
                     std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Reader only: the next message. Throws std::invalid_argument on the writer, TimeoutError
  /// when nothing (or not all of a multi-chunk message) arrived in time — the next dequeue()
  /// resumes where this one stopped, so nothing is lost — and DistributedError when the writer
  /// closed or broke the queue and nothing is left to read; SourceFailedError when the writer sent
  /// enqueue_error instead of a message. A timeout of zero never waits.
  /// `indefinite` (vLLM's dequeue(indefinite=True)): no long-wait log lines while waiting (an
  /// idle engine worker); the deadline still holds (every blocking call here has one).
  Bytes dequeue(std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                bool indefinite = false);

  /// vLLM's shutdown(): callable from any thread of this process. Wakes this process's
  /// enqueue/dequeue/wait_until_ready calls that are waiting (asleep or spinning) and makes them,
  /// and every later call, throw DistributedError with "cancelled" in its message (Python:
  /// groupcoord.DistributedError, a RuntimeError). The peers are not told; destroying the queue
  /// does that.
  void shutdown();
  /// Whether shutdown() was called.
  bool is_shut_down() const;

  /// Interval of the "has waited N ms" log lines of a long wait (default: the environment's
  /// GROUPCOORD_RINGBUFFER_WARNING_INTERVAL in seconds, else 60 s). Throws std::invalid_argument
  /// unless positive.
  void set_warning_interval(std::chrono::milliseconds interval);
  std::chrono::milliseconds warning_interval() const;

  /// vLLM's broadcast_object: the writer enqueues `obj` (required there: std::invalid_argument
  /// when absent) and returns it; a reader ignores `obj` and returns dequeue(). Uses the default
  /// timeout.
  Bytes broadcast_object(const std::optional<Bytes>& obj = std::nullopt);
  /// The same for a Bytes (beyond vLLM's API): not first copied into a temporary std::optional,
  /// and an rvalue comes back as the writer's result without a copy. Only a Bytes chooses this
  /// overload; literals and std::nullopt keep the one above.
  template <typename B, std::enable_if_t<std::is_same_v<std::decay_t<B>, Bytes>, int> = 0>
  Bytes broadcast_object(B&& obj) {
    if constexpr (std::is_lvalue_reference_v<B> || std::is_const_v<std::remove_reference_t<B>>) {
      return broadcast_held_object(obj);  // a const one cannot be moved from either
    } else {
      if (!is_writer()) return dequeue();
      enqueue(obj);
      return std::move(obj);
    }
  }

  /// True on the writer.
  bool is_writer() const;
  /// True on a reader.
  bool is_reader() const;
  /// Number of readers (vLLM's n_reader).
  int num_readers() const;
  /// Readers on the writer's node, served through shared memory (vLLM's n_local_reader); the
  /// others are served over a TCP connection each.
  int num_local_readers() const;
  /// Group rank of the writer; -1 when the writer belongs to no group (create(), and readers of
  /// an external writer).
  int writer_rank() const;
  /// Ranks of the readers, in reader-index order (vLLM's handle.local_reader_ranks): group ranks,
  /// or the ranks of the handle for queues made by create() / create_from_handle().
  const std::vector<int>& reader_ranks() const;
  /// This reader's index among the readers (vLLM's local_reader_rank); -1 on the writer.
  int reader_index() const;
  /// Chunk size in bytes, header included (a chunk carries max_chunk_bytes - 16 payload bytes).
  std::size_t max_chunk_bytes() const;
  /// Number of chunks in the ring.
  std::size_t max_chunks() const;
  /// Name used in errors and logs, e.g. "mq[world, writer 0]".
  const std::string& name() const;
  /// The segment's POSIX name (e.g. "/gcmq-1a2b3c4d-4242-..."), empty when there are no readers.
  /// After creation it is already unlinked: no entry of that name remains in /dev/shm.
  const std::string& shm_name() const;
  /// Timeout used when a call passes std::nullopt (initially the group's timeout).
  std::chrono::milliseconds default_timeout() const;
  /// Changes default_timeout() for this process's side of the queue.
  void set_default_timeout(std::chrono::milliseconds timeout);

 private:
  explicit MessageQueue(std::unique_ptr<Impl> impl);
  /// broadcast_object of a Bytes the caller keeps: the writer's result is a copy.
  Bytes broadcast_held_object(const Bytes& obj);

  std::unique_ptr<Impl> impl_;
};

}  // namespace groupcoord
