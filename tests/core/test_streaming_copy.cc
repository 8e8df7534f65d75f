// detail::copy_large: byte-exact at every size around the streaming threshold, with destinations
// 0, 1, 3, 16, 31, 48 and 63 bytes past a 64-byte line (the streamed path copies an unaligned head
// of up to 63 bytes, whole 64-byte lines, then a tail) and sources on and off alignment.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/streaming_copy.h"

namespace groupcoord {
namespace {

using detail::copy_large;
using detail::kStreamingCopyMinBytes;

/// Byte i of a pattern that differs from its neighbours and from the destination's fill.
std::uint8_t pattern(std::size_t i) { return static_cast<std::uint8_t>((i * 131 + 7) % 251); }

TEST(StreamingCopy, CopiesEveryByteAtEverySizeAndAlignment) {
  const std::size_t k = kStreamingCopyMinBytes;
  std::vector<std::uint8_t> src(k + 256);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
  std::vector<std::uint8_t> dst_storage(k + 256 + 64);
  // A 64-byte aligned start, so that the offsets below are the head lengths they say.
  const auto aligned = (reinterpret_cast<std::uintptr_t>(dst_storage.data()) + 63) / 64 * 64;
  std::uint8_t* const dst_base = reinterpret_cast<std::uint8_t*>(aligned);
  const std::size_t dst_size = k + 256;
  for (std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{100}, k - 1, k, k + 1, k + 63, k + 65}) {
    for (std::size_t src_offset : {0, 1, 15}) {
      for (std::size_t dst_offset : {0, 1, 3, 16, 31, 48, 63}) {
        if (n + src_offset > src.size() || n + dst_offset + 8 > dst_size) continue;
        std::uint8_t* const dst = dst_base;
        std::fill(dst, dst + dst_size, std::uint8_t{0xEE});
        copy_large(dst + dst_offset, src.data() + src_offset, n);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) wrong += dst[dst_offset + i] != pattern(src_offset + i);
        EXPECT_EQ(wrong, 0u) << n << " bytes, src +" << src_offset << ", dst +" << dst_offset;
        // Nothing written outside [dst_offset, dst_offset + n).
        for (std::size_t i = 0; i < dst_offset; ++i) ASSERT_EQ(dst[i], 0xEE) << "before, " << n;
        for (std::size_t i = dst_offset + n; i < dst_offset + n + 8; ++i) {
          ASSERT_EQ(dst[i], 0xEE) << "after, " << n;
        }
      }
    }
  }
}

}  // namespace
}  // namespace groupcoord
