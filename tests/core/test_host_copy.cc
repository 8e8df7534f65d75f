// detail::copy_bytes, append_bytes, bytes_copy and copy_large (core/host_copy.h): byte-exact at
// every distance between source and destination around the band where copy_bytes takes its own
// loop (modulo 4 KiB), at sizes around its thresholds; copy_large at every size around the
// streaming threshold, with destinations 0, 1, 3, 16, 31, 48 and 63 bytes past a 64-byte line (the
// streamed path copies an unaligned head of up to 15 bytes up to a 16-byte boundary, whole 64-byte
// lines, then a tail) and sources on and off alignment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/host_copy.h"

namespace groupcoord {
namespace {

using detail::append_bytes;
using detail::bytes_copy;
using detail::copy_bytes;
using detail::copy_large;
using detail::kAliasBand;
using detail::kShortCopyBytes;
using detail::kStreamingCopyMinBytes;

/// Byte i of a pattern that differs from its neighbours and from the destination's fill.
std::uint8_t pattern(std::size_t i) { return static_cast<std::uint8_t>((i * 131 + 7) % 251); }

/// A source of the pattern from which any distance to a destination can be picked.
struct Source {
  std::vector<std::uint8_t> storage = std::vector<std::uint8_t>((std::size_t{1} << 20) + 8192);
  Source() {
    for (std::size_t i = 0; i < storage.size(); ++i) storage[i] = pattern(i);
  }
  /// An address in the storage, with `n` bytes after it, that is `distance` bytes before `dst`
  /// modulo 4 KiB.
  const std::uint8_t* before(const void* dst, std::size_t distance, std::size_t n) const {
    const auto base = reinterpret_cast<std::uintptr_t>(storage.data()) + 4096;
    const std::uintptr_t want = (reinterpret_cast<std::uintptr_t>(dst) - distance) % 4096;
    const std::uintptr_t at = base + (want + 4096 - base % 4096) % 4096;
    EXPECT_LE(at + n, reinterpret_cast<std::uintptr_t>(storage.data() + storage.size()));
    return reinterpret_cast<const std::uint8_t*>(at);
  }
  /// How many of `n` bytes at `dst` differ from the source's bytes at `src`.
  std::size_t wrong(const std::uint8_t* dst, const std::uint8_t* src, std::size_t n) const {
    const std::size_t first = static_cast<std::size_t>(src - storage.data());
    std::size_t count = 0;
    for (std::size_t i = 0; i < n; ++i) count += dst[i] != pattern(first + i);
    return count;
  }
};

const std::size_t kDistances[] = {0, 1, 15, 16, 31, 32, 63, 64, 65, 2048, 4064, 4095};
const std::size_t kSizes[] = {
    0,     1,          63,    kShortCopyBytes - 1, kShortCopyBytes, kShortCopyBytes + 1, 4096 + 7,
    65536, 65536 + 63, 300000};

TEST(HostCopy, CopyBytesIsExactAtEveryDistanceAndSize) {
  static_assert(kAliasBand > 32 && kAliasBand <= 4096, "the distances below straddle the band");
  const Source source;
  std::vector<std::uint8_t> dst(300000 + 64 + 8);
  for (std::size_t n : kSizes) {
    for (std::size_t distance : kDistances) {
      std::fill(dst.begin(), dst.end(), std::uint8_t{0xEE});
      const std::uint8_t* src = source.before(dst.data() + 8, distance, n);
      copy_bytes(dst.data() + 8, src, n);
      EXPECT_EQ(source.wrong(dst.data() + 8, src, n), 0u) << n << " bytes, distance " << distance;
      for (std::size_t i = 0; i < 8; ++i) ASSERT_EQ(dst[i], 0xEE) << "before, " << n;
      for (std::size_t i = 8 + n; i < 8 + n + 8; ++i) ASSERT_EQ(dst[i], 0xEE) << "after, " << n;
    }
  }
}

// The band and the sizes where copy_bytes takes its own loop instead of memcpy: a destination 1 to
// kAliasBand - 1 bytes past its source modulo 4 KiB (not before it), from kShortCopyBytes to
// below kAliasCopyMaxBytes.
TEST(HostCopy, TakesItsOwnLoopExactlyInTheBand) {
  using detail::kAliasCopyMaxBytes;
  using detail::takes_alias_loop;
  std::vector<std::uint8_t> storage(3 * 4096 + 8192);
  const auto page = (reinterpret_cast<std::uintptr_t>(storage.data()) + 4095) / 4096 * 4096;
  const auto* src = reinterpret_cast<const std::uint8_t*>(page + 4096);
  auto at = [&](long offset) { return reinterpret_cast<const void*>(src + offset); };
  const std::size_t n = 64 << 10;
  EXPECT_TRUE(takes_alias_loop(at(16), src, n));
  EXPECT_TRUE(takes_alias_loop(at(1), src, n));
  EXPECT_TRUE(takes_alias_loop(at(static_cast<long>(kAliasBand) - 1), src, n));
  EXPECT_TRUE(takes_alias_loop(at(4096 + 16), src, n));
  EXPECT_TRUE(takes_alias_loop(at(16 - 4096), src, n));  // dst below src, same distance mod 4 KiB
  EXPECT_FALSE(takes_alias_loop(at(0), src, n));
  EXPECT_FALSE(takes_alias_loop(at(4096), src, n));
  EXPECT_FALSE(takes_alias_loop(at(static_cast<long>(kAliasBand)), src, n));
  EXPECT_FALSE(takes_alias_loop(at(-16), src, n));  // 16 bytes before: 4080 past, modulo 4 KiB
  EXPECT_FALSE(takes_alias_loop(at(16), src, kShortCopyBytes - 1));
  EXPECT_TRUE(takes_alias_loop(at(16), src, kShortCopyBytes));
  EXPECT_TRUE(takes_alias_loop(at(16), src, kAliasCopyMaxBytes - 1));
  EXPECT_FALSE(takes_alias_loop(at(16), src, kAliasCopyMaxBytes));
}

TEST(HostCopy, AppendBytesAndBytesCopyAreExactAtEveryDistanceAndSize) {
  const Source source;
  for (std::size_t n : kSizes) {
    for (std::size_t distance : kDistances) {
      // A string that already holds a prefix and has room for n more bytes: the distance is to
      // where the appended bytes go.
      Bytes out = "prefix";
      out.reserve(out.size() + n);
      const std::uint8_t* src = source.before(out.data() + out.size(), distance, n);
      append_bytes(out, src, n);
      ASSERT_EQ(out.size(), 6 + n);
      EXPECT_EQ(out.substr(0, 6), "prefix");
      EXPECT_EQ(source.wrong(reinterpret_cast<const std::uint8_t*>(out.data()) + 6, src, n), 0u)
          << n << " bytes appended, distance " << distance;
      // Without room: append_bytes grows the string itself.
      Bytes small = "x";
      append_bytes(small, src, n);
      EXPECT_EQ(small.size(), 1 + n);
      EXPECT_EQ(source.wrong(reinterpret_cast<const std::uint8_t*>(small.data()) + 1, src, n), 0u);
      const Bytes copy = bytes_copy(src, n);
      ASSERT_EQ(copy.size(), n);
      EXPECT_EQ(source.wrong(reinterpret_cast<const std::uint8_t*>(copy.data()), src, n), 0u);
    }
  }
}

TEST(HostCopy, CopyLargeIsExactAtEverySizeAndAlignment) {
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
