// The steady clock as a plain integer, for deadlines kept in atomics (the watched NCCL call).
#pragma once

#include <chrono>
#include <cstdint>

namespace groupcoord {
namespace cuda {

/// std::chrono::steady_clock::now() in nanoseconds since its epoch.
inline std::int64_t steady_nanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace cuda
}  // namespace groupcoord
