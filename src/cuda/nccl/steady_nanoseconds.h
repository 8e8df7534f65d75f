// The clock of operation deadlines, as a plain integer for deadlines kept in atomics (the watched
// NCCL call, the in-flight ring). Every enqueue reads it once, so it must cost next to nothing:
// CLOCK_MONOTONIC_COARSE is a vDSO read of the kernel's last tick (a few ns on any clock source),
// where the fine monotonic clock becomes a system call on VMs whose clock source the vDSO cannot
// read. Its resolution is one tick (1-4 ms), far below any group timeout; every reader of these
// deadlines uses this same clock.
#pragma once

#include <time.h>

#include <cstdint>

namespace groupcoord {
namespace cuda {

/// CLOCK_MONOTONIC_COARSE in nanoseconds (resolution: one kernel tick).
inline std::int64_t coarse_steady_nanoseconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1000000000LL + now.tv_nsec;
}

}  // namespace cuda
}  // namespace groupcoord
