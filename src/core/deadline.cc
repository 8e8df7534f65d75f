#include "core/deadline.h"

#include <algorithm>

namespace groupcoord {
namespace shm {

Deadline::Deadline(std::chrono::milliseconds timeout)
    : start_(std::chrono::steady_clock::now()), timeout_(timeout) {}

bool Deadline::expired() const { return std::chrono::steady_clock::now() - start_ >= timeout_; }

std::chrono::milliseconds Deadline::elapsed() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start_);
}

std::chrono::milliseconds Deadline::remaining() const {
  return std::max(timeout_ - elapsed(), std::chrono::milliseconds(0));
}

std::chrono::nanoseconds Deadline::remaining_precise() const {
  const auto left = start_ + timeout_ - std::chrono::steady_clock::now();
  return std::max<std::chrono::nanoseconds>(left, std::chrono::nanoseconds::zero());
}

}  // namespace shm
}  // namespace groupcoord
