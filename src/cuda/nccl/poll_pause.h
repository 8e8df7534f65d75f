// Back-off between two polls of a condition that another agent (NCCL's threads, the GPU) makes
// true: yield first (low latency for short waits), then sleep, so that long waits and
// oversubscribed machines do not burn a core (docs/testing.md).
#pragma once

#include <chrono>
#include <thread>

namespace groupcoord {
namespace cuda {

/// Pauses before poll number `round` (0, 1, 2, ...).
inline void poll_pause(int round) {
  if (round < 64) {
    std::this_thread::yield();
  } else if (round < 1064) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace cuda
}  // namespace groupcoord
