// Noticing that a peer process on this node died (SIGKILL, OOM killer, crash) while we wait on
// its flags: without this, a reader would wait out its whole deadline for a writer that no
// longer exists. Process ids are only comparable inside one pid namespace, so every check is
// gated on both sides sharing it (containers sharing /dev/shm may not): this_pid_namespace(),
// process_group/rank_liveness.h.
#pragma once

#include <chrono>
#include <cstdint>

namespace groupcoord {
namespace shm {

/// True when `pid` certainly no longer exists (kill(pid, 0) fails with ESRCH). False for 0,
/// for a live process, and when unsure.
bool process_is_gone(std::int32_t pid);

/// Rate limit for liveness checks inside a polling loop (each check is a system call).
class LivenessTimer {
 public:
  /// Checks at most every `interval`.
  explicit LivenessTimer(std::chrono::milliseconds interval = std::chrono::milliseconds(200))
      : interval_(interval), next_(std::chrono::steady_clock::now() + interval) {}
  /// True when a check is due (and schedules the next one).
  bool due();

 private:
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point next_;
};

}  // namespace shm
}  // namespace groupcoord
