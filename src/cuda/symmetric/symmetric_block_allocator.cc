#include "cuda/symmetric/symmetric_block_allocator.h"

#include "groupcoord/check.h"

namespace groupcoord {
namespace cuda {

int SymmetricBlockAllocator::add_segment(std::size_t bytes) {
  FreeRanges ranges;
  const std::size_t usable = bytes / kAlignment * kAlignment;
  if (usable > 0) ranges.emplace(0, usable);
  segments_.push_back(std::move(ranges));
  return segment_count() - 1;
}

std::optional<SymmetricBlockAllocator::Block> SymmetricBlockAllocator::allocate(std::size_t bytes) {
  const std::size_t units = bytes == 0 ? 1 : (bytes + kAlignment - 1) / kAlignment;
  const std::size_t size = units * kAlignment;
  for (int s = 0; s < segment_count(); ++s) {
    FreeRanges& ranges = segments_[s];
    for (auto it = ranges.begin(); it != ranges.end(); ++it) {
      if (it->second < size) continue;
      const std::size_t offset = it->first;
      const std::size_t rest = it->second - size;
      ranges.erase(it);
      if (rest > 0) ranges.emplace(offset + size, rest);
      Block block{next_id_++, s, offset, size};
      live_.emplace(block.id, block);
      return block;
    }
  }
  return std::nullopt;
}

void SymmetricBlockAllocator::release(std::int64_t id) {
  auto found = live_.find(id);
  GC_CHECK(found != live_.end(), "symmetric memory pool: block ", id, " is not allocated");
  const Block block = found->second;
  live_.erase(found);
  FreeRanges& ranges = segments_[block.segment];
  std::size_t offset = block.offset;
  std::size_t size = block.size;
  auto next = ranges.lower_bound(offset);
  if (next != ranges.begin()) {  // merge with the range that ends where this block starts
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      ranges.erase(prev);
    }
  }
  if (next != ranges.end() && offset + size == next->first) {  // and with the one after it
    size += next->second;
    ranges.erase(next);
  }
  ranges.emplace(offset, size);
}

std::size_t SymmetricBlockAllocator::free_bytes(int segment) const {
  std::size_t total = 0;
  for (const auto& range : segments_.at(segment)) total += range.second;
  return total;
}

}  // namespace cuda
}  // namespace groupcoord
