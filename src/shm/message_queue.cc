// MessageQueue's operations on an existing ring (creation is in queue_factory.cc).
#include "groupcoord/message_queue.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/deadline.h"
#include "core/wake_word.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "shm/chunk_frame.h"
#include "shm/message_queue_impl.h"
#include "shm/process_liveness.h"

namespace groupcoord {

namespace {

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

std::uint32_t as_word(shm::ReaderState state) { return static_cast<std::uint32_t>(state); }

// Whether ring reader `r` of the writer `q` reads over a socket (the fanout's readers).
bool is_remote(const MessageQueue::Impl& q, std::size_t r) {
  return q.fanout && q.fanout->serves(q.reader_ranks[r]);
}

// The writer's half of enqueue() for the readers of the ring.
void enqueue_local(MessageQueue::Impl& q, const Bytes& obj, const shm::Deadline& deadline);

}  // namespace

// ---- construction ---------------------------------------------------------------------------

std::unique_ptr<MessageQueue::Impl> MessageQueue::Impl::make_writer(
    std::string name, int writer_rank, std::vector<int> reader_ranks, std::size_t max_chunk_bytes,
    std::size_t max_chunks, std::chrono::milliseconds timeout,
    std::unique_ptr<shm::ShmRingBuffer> ring, std::unique_ptr<shm::RemoteFanout> fanout) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  impl->writer_rank = writer_rank;
  impl->reader_ranks = std::move(reader_ranks);
  impl->max_chunk_bytes = max_chunk_bytes;
  impl->max_chunks = max_chunks;
  impl->timeout = timeout;
  impl->n_local_reader = impl->reader_ranks.size() - (fanout ? fanout->size() : 0);
  impl->fanout = std::move(fanout);
  if (ring) {
    std::vector<std::string> reader_names;
    std::vector<bool> remote;
    for (std::size_t r = 0; r < impl->reader_ranks.size(); ++r) {
      reader_names.push_back("reader " + rank_name(impl->reader_ranks[r]));
      remote.push_back(is_remote(*impl, r));
    }
    impl->shm_name = ring->segment().name();
    impl->writer = std::make_unique<shm::RingWriter>(*ring, impl->name, std::move(reader_names),
                                                     std::move(remote));
    impl->ring = std::move(ring);
  }
  return impl;
}

std::unique_ptr<MessageQueue::Impl> MessageQueue::Impl::make_remote_reader(
    std::string name, int writer_rank, std::vector<int> reader_ranks, int reader_index,
    std::size_t n_local_reader, std::size_t max_chunk_bytes, std::size_t max_chunks,
    std::chrono::milliseconds timeout, std::unique_ptr<shm::RemoteInbox> inbox) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  impl->writer_rank = writer_rank;
  impl->reader_ranks = std::move(reader_ranks);
  impl->reader_index = reader_index;
  impl->n_local_reader = n_local_reader;
  impl->max_chunk_bytes = max_chunk_bytes;
  impl->max_chunks = max_chunks;
  impl->timeout = timeout;
  impl->inbox = std::move(inbox);
  return impl;
}

std::unique_ptr<MessageQueue::Impl> MessageQueue::Impl::make_reader(
    std::string name, int writer_rank, std::vector<int> reader_ranks, int reader_index,
    std::chrono::milliseconds timeout, std::unique_ptr<shm::ShmRingBuffer> ring,
    std::optional<MessageQueue::Handle> handle) {
  auto impl = std::make_unique<Impl>();
  impl->handle = std::move(handle);
  impl->name = std::move(name);
  impl->writer_rank = writer_rank;
  impl->reader_ranks = std::move(reader_ranks);
  impl->reader_index = reader_index;
  impl->n_local_reader = impl->reader_ranks.size();
  impl->max_chunk_bytes = ring->max_chunk_bytes();
  impl->max_chunks = ring->max_chunks();
  impl->timeout = timeout;
  impl->shm_name = ring->segment().name();
  impl->reader = std::make_unique<shm::RingReader>(*ring, static_cast<std::size_t>(reader_index),
                                                   impl->name, impl->writer_label());
  // The writer watches our pid only when it means the same process to it (same namespace).
  shm::ReaderSlot& slot = ring->reader_slot(static_cast<std::size_t>(reader_index));
  if (ring->header().pid_namespace != 0 &&
      ring->header().pid_namespace == shm::pid_namespace_id()) {
    slot.pid.store(static_cast<std::int32_t>(::getpid()), std::memory_order_relaxed);
  }
  // seq_cst, not just release: readers attaching at the same time from a handle then cannot
  // both miss each other's attachment (see shm::unlink_if_all_attached).
  slot.state.store(as_word(shm::ReaderState::kAttached), std::memory_order_seq_cst);
  shm::notify_waiters(ring->header().space_free);  // a writer may be waiting for it
  impl->ring = std::move(ring);
  return impl;
}

std::string MessageQueue::Impl::writer_label() const {
  if (writer_rank >= 0) return rank_name(writer_rank);
  return "the external writer" +
         (handle ? " (pid " + std::to_string(handle->writer_pid) + ")" : std::string());
}

MessageQueue::MessageQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MessageQueue::~MessageQueue() {
  Impl& q = *impl_;
  if (!q.ring) return;
  // Tell the peers, so that they fail at once instead of waiting for their deadline. The
  // writer's release store comes after its last publish: a reader that sees "closed" also sees
  // every message that was published.
  if (q.is_writer()) {
    const auto state = q.broken ? shm::WriterState::kBroken : shm::WriterState::kClosed;
    q.ring->header().writer_state.value.store(static_cast<std::uint32_t>(state),
                                              std::memory_order_release);
    shm::notify_waiters(q.ring->header().data_ready);  // sleeping readers see it now
  } else {
    q.ring->reader_state(q.reader_index)
        .store(as_word(shm::ReaderState::kClosed), std::memory_order_release);
    shm::notify_waiters(q.ring->header().space_free);  // as the writer waiting for this reader
  }
}

// ---- handshake ------------------------------------------------------------------------------

void MessageQueue::wait_until_ready(std::optional<std::chrono::milliseconds> timeout) {
  Impl& q = *impl_;
  q.check_not_cancelled("wait_until_ready");
  if (q.ready || !q.ring) {
    q.ready = true;
    return;
  }
  GC_CHECK(!timeout || timeout->count() >= 0, q.name, ": wait_until_ready: negative timeout ",
           timeout->count(), " ms");
  const shm::Deadline deadline(timeout.value_or(q.timeout));
  shm::ShmRingBuffer& ring = *q.ring;
  if (q.is_writer()) {
    // Every reader must have attached (mapped the segment); one that closed never will. Not
    // "called wait_until_ready": as in vLLM, one thread may make a writer and a reader and call
    // the writer's wait_until_ready first.
    std::size_t waiting_for = 0;
    auto all_ready = [&] {
      q.check_not_cancelled("wait_until_ready");
      for (std::size_t r = 0; r < ring.n_reader(); ++r) {
        if (is_remote(q, r)) continue;  // reads over its socket, never announces itself here
        const std::uint32_t state = ring.reader_state(r).load(std::memory_order_acquire);
        if (state == as_word(shm::ReaderState::kClosed)) {
          GC_THROW(DistributedError, q.name, ": wait_until_ready: reader ",
                   rank_name(q.reader_ranks[r]), " closed the queue");
        }
        if (state != as_word(shm::ReaderState::kAttached) &&
            state != as_word(shm::ReaderState::kReady)) {
          waiting_for = r;
          return false;
        }
      }
      return true;
    };
    if (!shm::wait_on(ring.header().space_free, all_ready, deadline)) {
      GC_THROW(TimeoutError, q.name, ": wait_until_ready timed out after ",
               deadline.timeout().count(), " ms waiting for reader ",
               rank_name(q.reader_ranks[waiting_for]));
    }
    // Every reader has attached: the name is no longer needed (a no-op for collectively made
    // queues, whose name is gone already; create() queues lose theirs here at the latest).
    ring.segment().unlink();
    ring.header().writer_ready.value.store(1, std::memory_order_release);
    shm::notify_waiters(ring.header().data_ready);
  } else {
    ring.reader_state(q.reader_index)
        .store(as_word(shm::ReaderState::kReady), std::memory_order_release);
    shm::notify_waiters(ring.header().space_free);
    auto writer_ready = [&] {
      q.check_not_cancelled("wait_until_ready");
      if (ring.header().writer_ready.value.load(std::memory_order_acquire) == 1) return true;
      if (ring.header().writer_state.value.load(std::memory_order_acquire) !=
          static_cast<std::uint32_t>(shm::WriterState::kOpen)) {
        GC_THROW(DistributedError, q.name, ": wait_until_ready: the writer (", q.writer_label(),
                 ") closed the queue");
      }
      return false;
    };
    if (!shm::wait_on(ring.header().data_ready, writer_ready, deadline)) {
      GC_THROW(TimeoutError, q.name, ": wait_until_ready timed out after ",
               deadline.timeout().count(), " ms waiting for the writer (", q.writer_label(), ")");
    }
  }
  q.ready = true;
}

// ---- messages -------------------------------------------------------------------------------

void MessageQueue::enqueue(const Bytes& obj, std::optional<std::chrono::milliseconds> timeout) {
  Impl& q = *impl_;
  GC_CHECK(q.is_writer(), q.name, ": enqueue: only the writer (", q.writer_label(),
           ") can enqueue; this process is reader ", q.reader_index);
  GC_CHECK(!timeout || timeout->count() >= 0, q.name, ": enqueue: negative timeout ",
           timeout->count(), " ms");
  q.check_not_cancelled("enqueue");
  if (q.broken) {
    GC_THROW(DistributedError, q.name,
             ": enqueue: the queue is broken (an earlier enqueue timed out half-way through a "
             "message larger than the ring)");
  }
  if (!q.ring) return;  // no readers: nothing to do, as in vLLM
  const shm::Deadline deadline(timeout.value_or(q.timeout));
  if (q.n_local_reader > 0) enqueue_local(q, obj, deadline);
  // The readers on other nodes get it after the local ones (their sockets buffer it).
  if (q.fanout) q.fanout->send(obj, deadline);
}

namespace {

void enqueue_local(MessageQueue::Impl& q, const Bytes& obj, const shm::Deadline& deadline) {
  const std::size_t payload = shm::chunk_payload(q.max_chunk_bytes);
  const std::uint64_t count = shm::chunks_for(obj.size(), payload);
  GC_CHECK(count <= UINT32_MAX, q.name, ": enqueue: a message of ", obj.size(),
           " bytes needs more than 2^32 chunks of ", q.max_chunk_bytes, " bytes");

  // Wait up front for every chunk the message needs that fits in the ring: when that times out
  // nothing has been written and the queue stays usable. Only a message larger than the ring
  // must stream, and can time out half-way.
  q.writer->wait_free(static_cast<std::size_t>(std::min<std::uint64_t>(count, q.max_chunks)),
                      deadline, "enqueue", q.wait_options());
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint8_t* chunk = nullptr;
    try {
      chunk = q.writer->acquire(deadline, "enqueue", q.wait_options());
    } catch (...) {
      if (i > 0) {
        // Readers hold part of a message that can never be completed.
        q.broken = true;
        q.ring->header().writer_state.value.store(
            static_cast<std::uint32_t>(shm::WriterState::kBroken), std::memory_order_release);
        shm::notify_waiters(q.ring->header().data_ready);
      }
      throw;
    }
    const std::size_t offset = static_cast<std::size_t>(i) * payload;
    const std::size_t n = std::min(payload, obj.size() - offset);
    shm::write_chunk_header(
        chunk, {obj.size(), static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(count)});
    if (n > 0) std::memcpy(chunk + shm::kChunkHeaderBytes, obj.data() + offset, n);
    q.writer->publish();
  }
}

}  // namespace

Bytes MessageQueue::dequeue(std::optional<std::chrono::milliseconds> timeout, bool indefinite) {
  Impl& q = *impl_;
  q.check_not_cancelled("dequeue");
  GC_CHECK(!q.is_writer(), q.name, ": dequeue: only readers can dequeue; this process is ",
           "the writer (", q.writer_label(), ")");
  GC_CHECK(!timeout || timeout->count() >= 0, q.name, ": dequeue: negative timeout ",
           timeout->count(), " ms");
  const shm::Deadline deadline(timeout.value_or(q.timeout));
  if (q.inbox) return q.inbox->receive(deadline);
  const std::size_t payload = shm::chunk_payload(q.max_chunk_bytes);
  while (true) {
    const std::uint8_t* chunk = nullptr;
    try {
      chunk = q.reader->acquire(deadline, "dequeue", q.wait_options(indefinite));
    } catch (const TimeoutError& error) {
      if (!q.partial) throw;
      // What we have so far is kept: the next dequeue() continues with the next chunk.
      throw TimeoutError(std::string(error.what()) + " (chunk " + std::to_string(q.partial->next) +
                         " of " + std::to_string(q.partial->count) +
                         " of a message; dequeue again to resume it)");
    }
    const shm::ChunkHeader header = shm::read_chunk_header(chunk);
    if (!q.partial) {
      if (header.index != 0 || header.count != shm::chunks_for(header.total_bytes, payload)) {
        GC_THROW(DistributedError, q.name, ": dequeue: corrupt chunk ", q.reader->current(),
                 " (index ", header.index, ", count ", header.count, ", size ", header.total_bytes,
                 ")");
      }
      q.partial.emplace();
      q.partial->data.resize(header.total_bytes);
      q.partial->total = header.total_bytes;
      q.partial->count = header.count;
    } else if (header.index != q.partial->next || header.count != q.partial->count ||
               header.total_bytes != q.partial->total) {
      GC_THROW(DistributedError, q.name, ": dequeue: chunk ", q.reader->current(),
               " does not continue the current message (index ", header.index, ", expected ",
               q.partial->next, ")");
    }
    Impl::Partial& message = *q.partial;
    const std::size_t offset = static_cast<std::size_t>(header.index) * payload;
    const std::size_t n = std::min<std::size_t>(payload, message.total - offset);
    if (n > 0) std::memcpy(&message.data[offset], chunk + shm::kChunkHeaderBytes, n);
    q.reader->release();
    if (++message.next == message.count) {
      Bytes result = std::move(message.data);
      q.partial.reset();
      return result;
    }
  }
}

Bytes MessageQueue::broadcast_object(const std::optional<Bytes>& obj) {
  if (!impl_->is_writer()) return dequeue();
  GC_CHECK(obj.has_value(), impl_->name,
           ": broadcast_object: the writer must pass the object to broadcast");
  enqueue(*obj);
  return *obj;
}

// ---- accessors ------------------------------------------------------------------------------

bool MessageQueue::is_writer() const { return impl_->is_writer(); }
bool MessageQueue::is_reader() const { return !impl_->is_writer(); }
int MessageQueue::num_readers() const { return static_cast<int>(impl_->reader_ranks.size()); }
int MessageQueue::num_local_readers() const { return static_cast<int>(impl_->n_local_reader); }
int MessageQueue::writer_rank() const { return impl_->writer_rank; }
const std::vector<int>& MessageQueue::reader_ranks() const { return impl_->reader_ranks; }
int MessageQueue::reader_index() const { return impl_->reader_index; }
std::size_t MessageQueue::max_chunk_bytes() const { return impl_->max_chunk_bytes; }
std::size_t MessageQueue::max_chunks() const { return impl_->max_chunks; }
const std::string& MessageQueue::name() const { return impl_->name; }
const std::string& MessageQueue::shm_name() const { return impl_->shm_name; }
std::chrono::milliseconds MessageQueue::default_timeout() const { return impl_->timeout; }

void MessageQueue::shutdown() {
  Impl& q = *impl_;
  q.cancelled.store(true, std::memory_order_release);
  // Wake this process's sleeping waits (a wake-up reaches every sleeper of the word; the other
  // processes' find nothing new and sleep again).
  if (q.ring) {
    shm::notify_waiters(q.ring->header().data_ready);
    shm::notify_waiters(q.ring->header().space_free);
  }
}

bool MessageQueue::is_shut_down() const { return impl_->cancelled.load(std::memory_order_acquire); }

void MessageQueue::set_warning_interval(std::chrono::milliseconds interval) {
  GC_CHECK(interval.count() > 0, impl_->name, ": set_warning_interval: the interval must be ",
           "positive, got ", interval.count(), " ms");
  impl_->warn_every = interval;
}

std::chrono::milliseconds MessageQueue::warning_interval() const { return impl_->warn_every; }

std::chrono::milliseconds MessageQueue::Impl::default_warning_interval() {
  const char* text = std::getenv("GROUPCOORD_RINGBUFFER_WARNING_INTERVAL");
  if (text == nullptr || *text == '\0') return std::chrono::seconds(60);
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0)) {
    throw std::invalid_argument(std::string("GROUPCOORD_RINGBUFFER_WARNING_INTERVAL=") + text +
                                ": expected a positive number of seconds");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

void MessageQueue::set_default_timeout(std::chrono::milliseconds timeout) {
  GC_CHECK(timeout.count() >= 0, impl_->name, ": set_default_timeout: negative timeout ",
           timeout.count(), " ms");
  impl_->timeout = timeout;
}

}  // namespace groupcoord
