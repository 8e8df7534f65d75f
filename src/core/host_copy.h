// Host memory copies that avoid glibc memcpy's slow cases (private to the library). Every copy of
// message or tensor bytes between user memory and shared memory goes through these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "groupcoord/bytes.h"

namespace groupcoord {
namespace detail {

/// Copies below this many bytes are plain memcpy in copy_bytes: glibc copies them with vector
/// registers, whatever the addresses.
constexpr std::size_t kShortCopyBytes = 1024;

/// copy_bytes uses its own loop when the destination is 1 to kAliasBand - 1 bytes past the source
/// modulo a 4 KiB page and the copy is shorter than kAliasCopyMaxBytes. glibc's memcpy copies from
/// about 2 KiB to 512 KiB with `rep movsb`, which on the AMD EPYC (Zen) development VM runs 17-20x
/// slower at exactly those distances (64 KiB: 21-31 µs against 1.3-1.8; 1..31 measured, the band
/// doubled for other generations); from 512 KiB on glibc copies differently and is fast there.
/// malloc's 16-byte headers put copies in the band often: a copy of a buffer into the block
/// allocated right after it is 16 bytes past it modulo 4 KiB whenever the size is a multiple of
/// 4 KiB.
constexpr std::size_t kAliasBand = 64;
constexpr std::size_t kAliasCopyMaxBytes = std::size_t{512} << 10;

/// Whether copy_bytes(dst, src, n) takes its own loop (see kAliasBand).
bool takes_alias_loop(const void* dst, const void* src, std::size_t n);

/// memcpy(dst, src, n) for non-overlapping ranges, without memcpy's 17-20x slow case (see
/// kAliasBand; there it takes 1.4-1.6x memcpy's best time). Small copies are memcpy inline.
void copy_bytes_checked(void* dst, const void* src, std::size_t n);
inline void copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n < kShortCopyBytes) {
    std::memcpy(dst, src, n);
  } else {
    copy_bytes_checked(dst, src, n);
  }
}

/// Appends `n` bytes at `src` to `out` through copy_bytes (std::string::append would memcpy).
/// `src` must not point into `out`.
void append_bytes(Bytes& out, const void* src, std::size_t n);

/// A copy of `n` bytes at `src`, made through copy_bytes.
Bytes bytes_copy(const void* src, std::size_t n);
inline Bytes bytes_copy(const Bytes& bytes) { return bytes_copy(bytes.data(), bytes.size()); }

/// Copies below this many bytes are copy_bytes in copy_large: their destination may still be in
/// cache when the caller reads it, and a cached copy is as fast there.
constexpr std::size_t kStreamingCopyMinBytes = std::size_t{4} << 20;

/// copy_bytes(dst, src, n), except that from kStreamingCopyMinBytes on (x86-64) the stores are
/// non-temporal: the destination's lines are written without being read into the cache first,
/// and the copy does not evict the rest of the working set. glibc's memcpy streams only above its
/// own threshold (about three quarters of the shared cache); an 8 MiB copy on the development VM
/// (32 MiB L3) ran at 10.5 GB/s through memcpy and 20.9 GB/s streamed
/// (docs/benchmarks/cpu_collectives.md, session 14). Other architectures: memcpy.
void copy_large(void* dst, const void* src, std::size_t n);

}  // namespace detail
}  // namespace groupcoord
