// ScopedWaitInterrupt: lets the thread that waits inside a shared-memory wait (a MessageQueue's
// enqueue, dequeue and wait_until_ready, the CPU group's shared-memory collectives) react to
// something the shared state cannot show, such as a signal.
#pragma once

#include <functional>

namespace groupcoord {

/// While it lives, every shared-memory wait of this thread runs `check` before each of its sleeps
/// (so at least every 20 ms once past the spin and yield phases); what `check` throws ends the
/// wait. For what the shared state cannot show: the Python binding checks its signal handlers here,
/// so that a wait on the calling thread stays interruptible (Ctrl-C) without handing the call to a
/// helper thread. Nests (the innermost applies).
class ScopedWaitInterrupt {
 public:
  explicit ScopedWaitInterrupt(std::function<void()> check);
  ~ScopedWaitInterrupt();
  ScopedWaitInterrupt(const ScopedWaitInterrupt&) = delete;
  ScopedWaitInterrupt& operator=(const ScopedWaitInterrupt&) = delete;

 private:
  std::function<void()> check_;
  const std::function<void()>* previous_;
};

}  // namespace groupcoord
