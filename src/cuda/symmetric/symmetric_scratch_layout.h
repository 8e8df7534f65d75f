// Where a routed collective places its buffers inside the communicator's scratch window, and how
// the scratch grows. Plain arithmetic on values every rank shares (sizes, world size, rank), so
// that every rank takes the same decision (docs/cuda.md).
//
//   all_gather      [ output: world_size x input ]          the input is copied to its own slot
//                                                           (NCCL's in-place all_gather)
//   reduce_scatter  [ input: world_size x output | output ]
//   all_reduce      [ buffer ]                              in place
//
// With a zero-copy input (a symmetric_empty tensor) the input region is not used: the call reads
// the tensor where it is. The size needed is the same either way, so that whether a rank's input
// is zero-copy never changes the (collective) scratch growth.
#pragma once

#include <cstddef>
#include <optional>

namespace groupcoord {
namespace cuda {

/// Offsets (bytes from the scratch base) of one call's buffers.
struct ScratchLayout {
  std::size_t input_offset = 0;   ///< where the input is copied (unused when zero-copy)
  std::size_t output_offset = 0;  ///< where NCCL writes the result
  std::size_t bytes_needed = 0;   ///< scratch size the call needs
};

/// Region starts are multiples of this.
inline constexpr std::size_t kScratchRegionAlignment = 4096;
/// Scratch sizes are multiples of this (ncclMemAlloc's cuMem granularity on recent GPUs).
inline constexpr std::size_t kScratchGranularity = 2u << 20;

/// all_gather of `input_bytes` per rank.
ScratchLayout all_gather_layout(std::size_t input_bytes, int world_size, int rank, bool zero_copy);
/// reduce_scatter producing `output_bytes` per rank.
ScratchLayout reduce_scatter_layout(std::size_t output_bytes, int world_size, bool zero_copy);
/// all_reduce of `bytes`.
ScratchLayout all_reduce_layout(std::size_t bytes, bool zero_copy);

/// The scratch size to use for a call that needs `needed` bytes when the scratch has `current`
/// (0: none yet): `current` when there is one and it fits; else the larger of `initial`, `needed`
/// and twice `current`, rounded up to kScratchGranularity and capped at `limit`; std::nullopt when
/// `needed` exceeds `limit` (the call takes the regular path).
std::optional<std::size_t> scratch_size_for(std::size_t current, std::size_t needed,
                                            std::size_t initial, std::size_t limit);

}  // namespace cuda
}  // namespace groupcoord
