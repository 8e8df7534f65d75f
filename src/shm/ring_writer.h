// The writer's side of the ring protocol (vLLM's MessageQueue.acquire_write).
//
// Ordering (the readers' side is in ring_reader.h):
//   acquire: the chunk is free when written == 0 or every read flag is 1. The flags are loaded
//            with acquire, pairing with each reader's release store of its read flag, so the
//            readers' copies out of the chunk happen before we overwrite it.
//   fill:    written = 0 first (the chunk is "being written"), then the caller writes the data.
//   publish: read flags = 0 with release, then written = 1 with release. Clearing the read
//            flags first keeps the chunk in the "not written" state until the very end; the
//            other order would pass through "written and partly read" (vLLM's note). A reader
//            that sees its read flag go 1 -> 0, or written go 0 -> 1, therefore also sees the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "shm/process_liveness.h"
#include "shm/ring_buffer.h"

namespace groupcoord {
namespace shm {

/// Writes chunks in ring order. One thread at a time.
class RingWriter {
 public:
  /// `label` names the queue in errors; `reader_names[r]` names reader r (e.g. "rank 3").
  /// `remote[r]`: reader r reads over a socket, not from the ring (remote_fanout.h): its read
  /// flags are published as 1, so the ring never waits for it.
  RingWriter(ShmRingBuffer& ring, std::string label, std::vector<std::string> reader_names,
             std::vector<bool> remote = {});

  /// True when the chunk `ahead` positions after the next one to write may be (re)written.
  bool is_free(std::size_t ahead = 0) const;
  /// Waits until the next `count` chunks are all free (count <= max_chunks). Throws TimeoutError
  /// naming the readers that have not read them, DistributedError when such a reader closed its
  /// queue or its process died.
  /// Throws "cancelled" (DistributedError) once options.cancelled is set.
  void wait_free(std::size_t count, const Deadline& deadline, const char* op,
                 const WaitOptions& options = WaitOptions());
  /// Waits for the next chunk (as wait_free(1)), marks it "being written" and returns its data.
  std::uint8_t* acquire(const Deadline& deadline, const char* op,
                        const WaitOptions& options = WaitOptions());
  /// Publishes the acquired chunk to every reader and moves on to the next one.
  void publish();

  /// Index of the next chunk to write.
  std::size_t current() const { return current_; }

 private:
  std::size_t index(std::size_t ahead) const { return (current_ + ahead) % ring_.max_chunks(); }
  /// Readers that have not read chunk `chunk` yet (it is written).
  std::vector<std::size_t> pending_readers(std::size_t chunk) const;
  [[noreturn]] void fail_wait(std::size_t chunk, const Deadline& deadline, const char* op) const;
  /// Throws DistributedError when a reader that has not read `chunk` closed its queue or died.
  void check_readers_alive(std::size_t chunk, const char* op);

  ShmRingBuffer& ring_;
  std::string label_;
  std::vector<std::string> reader_names_;
  std::vector<bool> remote_;
  std::size_t current_ = 0;
  LivenessTimer liveness_;
};

}  // namespace shm
}  // namespace groupcoord
