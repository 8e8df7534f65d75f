#include "shm/ring_writer.h"

#include <sstream>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace shm {

RingWriter::RingWriter(ShmRingBuffer& ring, std::string label,
                       std::vector<std::string> reader_names, std::vector<bool> remote)
    : ring_(ring),
      label_(std::move(label)),
      reader_names_(std::move(reader_names)),
      remote_(std::move(remote)) {
  reader_names_.resize(ring_.n_reader());
  remote_.resize(ring_.n_reader(), false);
  for (std::size_t r = 0; r < reader_names_.size(); ++r) {
    if (reader_names_[r].empty()) reader_names_[r] = "reader " + std::to_string(r);
  }
}

bool RingWriter::is_free(std::size_t ahead) const {
  const std::size_t chunk = index(ahead);
  if (ring_.written(chunk).load(std::memory_order_acquire) == 0) return true;
  for (std::size_t r = 0; r < ring_.n_reader(); ++r) {
    if (ring_.read(chunk, r).load(std::memory_order_acquire) == 0) return false;
  }
  return true;
}

std::vector<std::size_t> RingWriter::pending_readers(std::size_t chunk) const {
  std::vector<std::size_t> pending;
  if (ring_.written(chunk).load(std::memory_order_acquire) == 0) return pending;
  for (std::size_t r = 0; r < ring_.n_reader(); ++r) {
    if (ring_.read(chunk, r).load(std::memory_order_acquire) == 0) pending.push_back(r);
  }
  return pending;
}

void RingWriter::wait_free(std::size_t count, const Deadline& deadline, const char* op,
                           const WaitOptions& options) {
  GC_ASSERT(count <= ring_.max_chunks(), label_, ": waiting for ", count, " of ",
            ring_.max_chunks(), " chunks");
  for (std::size_t ahead = 0; ahead < count; ++ahead) {
    const std::size_t chunk = index(ahead);
    auto ready = [&] {
      options.throw_if_cancelled(label_, op);
      if (is_free(ahead)) return true;
      check_readers_alive(chunk, op);
      return false;
    };
    auto warn = [&](std::chrono::milliseconds waited) {
      GC_LOG(Warn, label_, ": ", op, " has waited ", waited.count(),
             " ms for the readers to free chunk ", chunk,
             " (a reader may be hanging or busy with long work)");
    };
    if (!wait_on(ring_.header().space_free, ready, deadline, warn, options.warn_every)) {
      fail_wait(chunk, deadline, op);
    }
  }
}

void RingWriter::check_readers_alive(std::size_t chunk, const char* op) {
  // A reader that left will never read this chunk: fail now instead of at the deadline. A reader
  // marks "closed" (release) after its last read, so having seen that, a read flag still at 0
  // really is unread.
  const bool check_pids = liveness_.due();
  for (std::size_t r = 0; r < ring_.n_reader(); ++r) {
    if (remote_[r]) continue;
    const ReaderSlot& slot = ring_.reader_slot(r);
    const bool closed = slot.state.load(std::memory_order_acquire) ==
                        static_cast<std::uint32_t>(ReaderState::kClosed);
    const std::int32_t pid = slot.pid.load(std::memory_order_relaxed);
    const bool dead = check_pids && process_is_gone(pid);
    if (!closed && !dead) continue;
    if (ring_.read(chunk, r).load(std::memory_order_acquire) != 0) continue;
    if (closed) {
      GC_THROW(DistributedError, label_, ": ", op, ": ", reader_names_[r],
               " closed the queue before reading chunk ", chunk);
    }
    GC_THROW(DistributedError, label_, ": ", op, ": ", reader_names_[r], " (pid ", pid,
             ") died before reading chunk ", chunk);
  }
}

void RingWriter::fail_wait(std::size_t chunk, const Deadline& deadline, const char* op) const {
  std::ostringstream names;
  const std::vector<std::size_t> pending = pending_readers(chunk);
  for (std::size_t i = 0; i < pending.size(); ++i) {
    names << (i ? ", " : "") << reader_names_[pending[i]];
  }
  GC_THROW(TimeoutError, label_, ": ", op, " timed out after ", deadline.timeout().count(),
           " ms waiting for ", names.str(), " to read chunk ", chunk, " (ring of ",
           ring_.max_chunks(), " chunks is full)");
}

std::uint8_t* RingWriter::acquire(const Deadline& deadline, const char* op,
                                  const WaitOptions& options) {
  wait_free(1, deadline, op, options);
  // "Being written": readers that have not read the previous contents cannot exist (all read
  // flags are 1 or the chunk was never written), so nobody looks at the chunk from now on.
  ring_.written(current_).store(0, std::memory_order_relaxed);
  return ring_.chunk_data(current_);
}

void RingWriter::publish() {
  for (std::size_t r = 0; r < ring_.n_reader(); ++r) {
    ring_.read(current_, r).store(remote_[r] ? 1 : 0, std::memory_order_release);
  }
  ring_.written(current_).store(1, std::memory_order_release);
  notify_waiters(ring_.header().data_ready);
  current_ = index(1);
}

}  // namespace shm
}  // namespace groupcoord
