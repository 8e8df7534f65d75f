// The allocator behind symmetric_empty: first fit over a list of segments (each one registered
// window). It is plain bookkeeping with no CUDA in it, and deterministic: ranks that make the same
// sequence of allocate / release / add_segment calls get the same offsets, which is what lets a
// collective on a symmetric_empty tensor use the same window offset on every rank (NCCL's
// symmetric kernels address a peer's buffer as "its window base + my offset").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace groupcoord {
namespace cuda {

/// First-fit block allocator over segments; see the file comment.
class SymmetricBlockAllocator {
 public:
  /// Offsets and sizes are multiples of this (16-byte vector accesses, coalesced kernels).
  static constexpr std::size_t kAlignment = 256;

  /// One allocated block. Ids count up from 0 in allocation order.
  struct Block {
    std::int64_t id;
    int segment;
    std::size_t offset;
    std::size_t size;
  };

  /// Appends a segment of `bytes` (made by the caller) and returns its index.
  int add_segment(std::size_t bytes);
  /// The lowest-addressed free range of the first segment that fits `bytes` (rounded up to
  /// kAlignment, at least one unit); std::nullopt when no segment has room.
  std::optional<Block> allocate(std::size_t bytes);
  /// Returns block `id` to its segment (merging neighbours). std::invalid_argument for an id
  /// that is not live.
  void release(std::int64_t id);

  int segment_count() const { return static_cast<int>(segments_.size()); }
  std::size_t live_blocks() const { return live_.size(); }
  /// Free bytes of `segment` (for tests).
  std::size_t free_bytes(int segment) const;

 private:
  /// Free ranges of one segment: offset -> size, never adjacent (merged).
  using FreeRanges = std::map<std::size_t, std::size_t>;

  std::vector<FreeRanges> segments_;
  std::map<std::int64_t, Block> live_;
  std::int64_t next_id_ = 0;
};

}  // namespace cuda
}  // namespace groupcoord
