// A reader's side of the ring protocol (vLLM's MessageQueue.acquire_read).
//
// Ordering (the writer's side is in ring_writer.h):
//   acquire: the chunk is readable when our read flag is 0 and written is 1. Both are loaded
//            with acquire: the writer's release stores of either (read flag 1 -> 0 on reuse,
//            written 0 -> 1 on first use) come after its data, so the data is visible to us.
//   release: our read flag = 1 with release, after we copied the data out; the writer's
//            acquire load of it orders its next overwrite after our copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/deadline.h"
#include "core/wait_pacing.h"
#include "shm/process_liveness.h"
#include "shm/ring_buffer.h"

namespace groupcoord {
namespace shm {

/// Reads chunks in ring order as reader `reader` of the ring. One thread at a time.
class RingReader {
 public:
  /// `label` names the queue in errors, `writer_name` the writer (e.g. "rank 0").
  RingReader(ShmRingBuffer& ring, std::size_t reader, std::string label, std::string writer_name);

  /// True when the next chunk has been published and not yet read by us.
  bool is_readable() const;
  /// Waits for the next chunk and returns its data (valid until release()). Throws TimeoutError
  /// at the deadline, DistributedError when the writer closed or broke the queue, or died, and
  /// nothing is left to read.
  /// Throws "cancelled" (DistributedError) once options.cancelled is set.
  const std::uint8_t* acquire(const Deadline& deadline, const char* op,
                              const WaitOptions& options = WaitOptions());
  /// Marks the acquired chunk as read (the writer may reuse it) and moves on.
  void release();

  /// Index of the next chunk to read.
  std::size_t current() const { return current_; }
  /// This reader's index in the ring.
  std::size_t reader() const { return reader_; }

 private:
  /// Throws when the writer will publish nothing more: it closed or broke the queue, or its
  /// process died (checked only while nothing is readable).
  void check_writer_alive(const char* op);

  ShmRingBuffer& ring_;
  std::size_t reader_;
  std::string label_;
  std::string writer_name_;
  std::size_t current_ = 0;
  bool watch_writer_pid_;  ///< the writer's pid means something here (same pid namespace)
  LivenessTimer liveness_;
  /// When the writer's messages tend to come (an engine's steps): the reader is awake for them.
  WaitPacing pacing_;
};

}  // namespace shm
}  // namespace groupcoord
