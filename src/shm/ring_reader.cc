#include "shm/ring_reader.h"

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "process_group/rank_liveness.h"

namespace groupcoord {
namespace shm {

RingReader::RingReader(ShmRingBuffer& ring, std::size_t reader, std::string label,
                       std::string writer_name)
    : ring_(ring),
      reader_(reader),
      label_(std::move(label)),
      writer_name_(std::move(writer_name)),
      watch_writer_pid_(ring.header().pid_namespace != 0 &&
                        ring.header().pid_namespace == this_pid_namespace()) {
  GC_ASSERT(reader < ring.n_reader(), label_, ": reader ", reader, " of ", ring.n_reader());
}

bool RingReader::is_readable() const {
  // Read flag first: seeing it cleared (release by the writer) makes the writer's earlier
  // "written = 0" visible, so the written flag we load next cannot be the stale 1 of the
  // previous round.
  if (ring_.read(current_, reader_).load(std::memory_order_acquire) != 0) return false;
  return ring_.written(current_).load(std::memory_order_acquire) == 1;
}

void RingReader::check_writer_alive(const char* op) {
  const auto state =
      static_cast<WriterState>(ring_.header().writer_state.value.load(std::memory_order_acquire));
  if (state == WriterState::kOpen) {
    if (!watch_writer_pid_ || !liveness_.due()) return;
    const std::int32_t pid = ring_.header().writer_pid;
    if (!process_is_gone(pid) || is_readable()) return;
    GC_THROW(DistributedError, label_, ": ", op, ": the writer (", writer_name_, ", pid ", pid,
             ") died; no message is left to read");
  }
  // The writer sets its state after its last publish, so having seen the state, a chunk it did
  // publish is visible now: look once more before giving up.
  if (is_readable()) return;
  if (state == WriterState::kBroken) {
    GC_THROW(DistributedError, label_, ": ", op, ": the writer (", writer_name_,
             ") broke the queue in the middle of a message (its enqueue timed out)");
  }
  GC_THROW(DistributedError, label_, ": ", op, ": the writer (", writer_name_,
           ") closed the queue; no message is left to read");
}

const std::uint8_t* RingReader::acquire(const Deadline& deadline, const char* op,
                                        const WaitOptions& options) {
  auto ready = [&] {
    options.throw_if_cancelled(label_, op);
    if (is_readable()) return true;
    check_writer_alive(op);
    return false;
  };
  auto note = [&](std::chrono::milliseconds waited) {
    // Idle readers are normal in an engine (waiting for the next request): info, not warn.
    GC_LOG(Info, label_, ": ", op, " has waited ", waited.count(), " ms for the writer (",
           writer_name_, ") to write chunk ", current_);
  };
  if (!wait_on(ring_.header().data_ready, ready, deadline, note, options.warn_every, WaitTuning(),
               &pacing_)) {
    GC_THROW(TimeoutError, label_, ": ", op, " timed out after ", deadline.timeout().count(),
             " ms waiting for the writer (", writer_name_, ") to write chunk ", current_);
  }
  return ring_.chunk_data(current_);
}

void RingReader::release() {
  ring_.read(current_, reader_).store(1, std::memory_order_release);
  notify_waiters(ring_.header().space_free);
  current_ = (current_ + 1) % ring_.max_chunks();
}

}  // namespace shm
}  // namespace groupcoord
