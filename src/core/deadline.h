// Deadline: when a wait gives up, on the steady clock; and the CPU's spin-loop hint. Used by
// every wait on shared memory (which sleeps on futexes, core/wake_word.h) and the queue's
// sockets.
#pragma once

#include <chrono>

namespace groupcoord {
namespace shm {

/// Tells the CPU the caller is in a spin loop (saves power, frees the sibling hyper-thread).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// A point in time after which a wait gives up. Steady clock, so wall-clock jumps do not matter.
class Deadline {
 public:
  /// Expires `timeout` from now (a zero or negative timeout is already expired).
  explicit Deadline(std::chrono::milliseconds timeout);
  /// True once the deadline has passed.
  bool expired() const;
  /// Time since the deadline was created.
  std::chrono::milliseconds elapsed() const;
  /// Time left before it expires (zero once expired).
  std::chrono::milliseconds remaining() const;
  /// The same, to the nanosecond (for sleeps that must end at the deadline, not a little before).
  std::chrono::nanoseconds remaining_precise() const;
  /// The timeout this deadline was created with (for error messages).
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::milliseconds timeout_;
};

}  // namespace shm
}  // namespace groupcoord
