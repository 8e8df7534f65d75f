// The shared-memory ring of vLLM's ShmRingBuffer: `max_chunks` chunks of `max_chunk_bytes`, each
// with a "written" flag and one "read" flag per reader, in one segment created by the writer.
//
// Segment layout (every block 64-byte aligned; each flag alone on a cache line so that readers
// marking chunks never contend with each other or with the writer's data):
//
//   +--------+-------------------+------------------------------------+--------------------+
//   | header | reader slots [n]  | chunk flags [max_chunks][1 + n]     | chunks [max_chunks] |
//   +--------+-------------------+------------------------------------+--------------------+
//                                  flag 0 = written, flag 1 + r = read by reader r
//
// The flags follow vLLM's state machine (ring_writer.h and ring_reader.h hold the two sides):
//   written=0               free: the writer may fill it, readers must wait
//   written=1, read[r]=0    reader r may read it
//   written=1, all read=1   consumed by everybody: the writer may reuse it
// The flags are std::atomic<uint32_t> placed in the segment (lock-free, hence address-free, so
// they work across processes); the protocol's acquire/release pairs are documented where used.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/shared_memory.h"
#include "core/wake_word.h"

namespace groupcoord {
namespace shm {

static_assert(std::atomic<std::uint32_t>::is_always_lock_free,
              "shared-memory flags need lock-free (address-free) atomics");

/// What the writer tells its readers about the queue as a whole.
enum class WriterState : std::uint32_t {
  kOpen = 0,    ///< messages may still come
  kClosed = 1,  ///< the writer is gone; what was published can still be read
  kBroken = 2,  ///< the writer gave up in the middle of a message; nothing more can be read
};

/// What each reader tells the writer about itself.
enum class ReaderState : std::uint32_t {
  kAbsent = 0,    ///< not attached (yet)
  kAttached = 1,  ///< mapped the segment
  kReady = 2,     ///< called wait_until_ready()
  kClosed = 3,    ///< gone: it will read nothing more
};

/// One atomic word on its own cache line.
struct alignas(64) PaddedFlag {
  std::atomic<std::uint32_t> value;
};

/// The segment's first block: identity (checked by attachers) and queue-wide state.
struct alignas(64) RingHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t n_reader;
  std::uint64_t max_chunk_bytes;
  std::uint64_t max_chunks;
  std::uint64_t token;  ///< random; proves an attacher opened this job's segment, not a namesake
  std::uint64_t pid_namespace;  ///< the writer's pid namespace (process_liveness.h); 0: unknown
  std::int32_t writer_pid;      ///< for readers to notice a dead writer
  PaddedFlag writer_state;      ///< a WriterState
  PaddedFlag writer_ready;      ///< 1 once the writer finished wait_until_ready()
  /// Rung by the writer after it publishes a chunk or changes writer_state: readers sleep on it.
  WakeWord data_ready;
  /// Rung by a reader after it marks a chunk read or changes its state: the writer sleeps on it.
  WakeWord space_free;
};

/// What a reader tells the writer about itself, on its own cache line.
struct alignas(64) ReaderSlot {
  std::atomic<std::uint32_t> state;  ///< a ReaderState
  std::atomic<std::int32_t> pid;     ///< 0 unless in the writer's pid namespace
};

/// Byte offsets of the blocks of a segment.
struct RingLayout {
  std::size_t reader_slots = 0;  ///< offset of ReaderSlot[n_reader]
  std::size_t flags = 0;         ///< offset of PaddedFlag[max_chunks * (1 + n_reader)]
  std::size_t chunks = 0;        ///< offset of the first chunk
  std::size_t chunk_stride = 0;  ///< max_chunk_bytes rounded up to 64
  std::size_t total = 0;         ///< segment size

  /// Computes the layout; throws std::invalid_argument when the sizes overflow.
  static RingLayout compute(std::size_t n_reader, std::size_t max_chunk_bytes,
                            std::size_t max_chunks);
};

/// How a ring wait behaves, set by the queue that owns the ring (per call).
struct WaitOptions {
  /// Set (by MessageQueue::shutdown(), from any thread) to make the wait throw "cancelled".
  const std::atomic<bool>* cancelled = nullptr;
  /// Interval of the long-wait log lines; zero: none (dequeue(indefinite=true)).
  std::chrono::milliseconds warn_every{60000};

  /// Throws DistributedError "<label>: <op>: cancelled (...)" once `cancelled` is set (the
  /// wait's queue was shut down).
  void throw_if_cancelled(const std::string& label, const char* op) const;
};

/// The writer's or a reader's mapping of one ring.
class ShmRingBuffer {
 public:
  /// Creates the segment `name` and initializes the header and every flag (writer side).
  /// Throws DistributedError when the system refuses (e.g. /dev/shm full).
  static std::unique_ptr<ShmRingBuffer> create(const std::string& name, std::size_t n_reader,
                                               std::size_t max_chunk_bytes, std::size_t max_chunks,
                                               std::uint64_t token);

  /// Result of attach(): the ring, or why there is none.
  struct AttachResult {
    std::unique_ptr<ShmRingBuffer> ring;
    bool not_found = false;  ///< no such segment on this node
    std::string error;
  };
  /// Maps an existing ring (reader side) and checks that its header matches what the writer
  /// announced (sizes and token).
  static AttachResult attach(const std::string& name, std::size_t n_reader,
                             std::size_t max_chunk_bytes, std::size_t max_chunks,
                             std::uint64_t token);

  std::size_t n_reader() const { return n_reader_; }
  std::size_t max_chunk_bytes() const { return max_chunk_bytes_; }
  std::size_t max_chunks() const { return max_chunks_; }
  /// The segment (for its name and for unlinking it).
  SharedMemory& segment() { return *segment_; }

  RingHeader& header() const { return *static_cast<RingHeader*>(segment_->data()); }
  /// Written flag of `chunk`.
  std::atomic<std::uint32_t>& written(std::size_t chunk) const { return flag(chunk, 0); }
  /// Read flag of `reader` for `chunk`.
  std::atomic<std::uint32_t>& read(std::size_t chunk, std::size_t reader) const {
    return flag(chunk, 1 + reader);
  }
  /// What `reader` publishes about itself.
  ReaderSlot& reader_slot(std::size_t reader) const;
  /// State word of `reader` (a ReaderState).
  std::atomic<std::uint32_t>& reader_state(std::size_t reader) const {
    return reader_slot(reader).state;
  }
  /// First byte of `chunk`'s max_chunk_bytes.
  std::uint8_t* chunk_data(std::size_t chunk) const {
    return base() + layout_.chunks + chunk * layout_.chunk_stride;
  }

 private:
  ShmRingBuffer(std::unique_ptr<SharedMemory> segment, std::size_t n_reader,
                std::size_t max_chunk_bytes, std::size_t max_chunks);
  std::uint8_t* base() const { return static_cast<std::uint8_t*>(segment_->data()); }
  std::atomic<std::uint32_t>& flag(std::size_t chunk, std::size_t index) const;

  std::unique_ptr<SharedMemory> segment_;
  std::size_t n_reader_;
  std::size_t max_chunk_bytes_;
  std::size_t max_chunks_;
  RingLayout layout_;
};

}  // namespace shm
}  // namespace groupcoord
