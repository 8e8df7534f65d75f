// Large host copies that bypass the caches on the way out (private to the library).
#pragma once

#include <cstddef>

namespace groupcoord {
namespace detail {

/// Copies below this many bytes are plain memcpy: their destination may still be in cache when
/// the caller reads it, and glibc's memcpy is as fast there.
constexpr std::size_t kStreamingCopyMinBytes = std::size_t{4} << 20;

/// memcpy(dst, src, n) for non-overlapping ranges. From kStreamingCopyMinBytes on (x86-64), the
/// stores are non-temporal: the destination's lines are written without being read into the
/// cache first, and the copy does not evict the rest of the working set. glibc's memcpy streams
/// only above its own threshold (about three quarters of the shared cache); an 8 MiB copy on the
/// development VM (32 MiB L3) ran at 10.5 GB/s through memcpy and 20.9 GB/s streamed
/// (docs/benchmarks/cpu_collectives.md, session 14). Other architectures: memcpy.
void copy_large(void* dst, const void* src, std::size_t n);

}  // namespace detail
}  // namespace groupcoord
