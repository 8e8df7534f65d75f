#include "cuda/symmetric/symmetric_scratch_layout.h"

#include <algorithm>

namespace groupcoord {
namespace cuda {

namespace {

std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

ScratchLayout all_gather_layout(std::size_t input_bytes, int world_size, int rank, bool zero_copy) {
  ScratchLayout layout;
  layout.output_offset = 0;
  layout.input_offset = zero_copy ? 0 : static_cast<std::size_t>(rank) * input_bytes;
  layout.bytes_needed = input_bytes * static_cast<std::size_t>(world_size);
  return layout;
}

ScratchLayout reduce_scatter_layout(std::size_t output_bytes, int world_size, bool zero_copy) {
  // The same size with or without a zero-copy input, so that a rank's local view of its input
  // can never change how much scratch (and so which collective registrations) a call needs.
  (void)zero_copy;
  const std::size_t input_bytes = output_bytes * static_cast<std::size_t>(world_size);
  ScratchLayout layout;
  layout.input_offset = 0;
  layout.output_offset = align_up(input_bytes, kScratchRegionAlignment);
  layout.bytes_needed = layout.output_offset + output_bytes;
  return layout;
}

ScratchLayout all_reduce_layout(std::size_t bytes, bool zero_copy) {
  (void)zero_copy;  // in place, or the output alone: the same region either way
  ScratchLayout layout;
  layout.bytes_needed = bytes;
  return layout;
}

std::optional<std::size_t> scratch_size_for(std::size_t current, std::size_t needed,
                                            std::size_t initial, std::size_t limit) {
  if (current > 0 && needed <= current) return current;
  if (needed > limit) return std::nullopt;
  const std::size_t wanted = std::max({initial, needed, 2 * current});
  return std::min(align_up(wanted, kScratchGranularity), std::max(limit, needed));
}

}  // namespace cuda
}  // namespace groupcoord
