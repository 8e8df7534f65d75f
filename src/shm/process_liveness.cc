#include "shm/process_liveness.h"

#include <signal.h>

#include <cerrno>

namespace groupcoord {
namespace shm {

bool process_is_gone(std::int32_t pid) {
  if (pid <= 0) return false;
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

bool LivenessTimer::due() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return false;
  next_ = now + interval_;
  return true;
}

}  // namespace shm
}  // namespace groupcoord
