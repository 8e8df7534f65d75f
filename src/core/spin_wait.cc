#include "core/spin_wait.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace groupcoord {
namespace shm {

namespace {

constexpr std::chrono::microseconds kFirstSleep{20};

/// Tells the CPU we are in a spin loop (saves power, frees the sibling hyper-thread).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace

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

void Backoff::pause() {
  if (steps_ < kSpins) {
    if (steps_++ == 0) sleeps_ = 0;
    cpu_relax();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (steps_ == kSpins) {
    ++steps_;
    yield_until_ = now + kYieldFor;
  }
  if (now < yield_until_) {
    sched_yield();
    return;
  }
  // Sleep phase: 20 us, 40 us, ... capped at kMaxSleep.
  const std::uint32_t doublings = std::min<std::uint32_t>(sleeps_++, 10);
  std::this_thread::sleep_for(
      std::min<std::chrono::microseconds>(kFirstSleep * (1u << doublings), kMaxSleep));
}

bool spin_until(const std::function<bool()>& ready, const Deadline& deadline,
                const std::function<void(std::chrono::milliseconds)>& on_long_wait,
                std::chrono::milliseconds warn_every) {
  Backoff backoff;
  auto next_warning = warn_every;
  while (true) {
    if (ready()) return true;
    if (deadline.expired()) return ready();  // one last look: the flag may have just flipped
    if (on_long_wait && warn_every.count() > 0) {
      const auto elapsed = deadline.elapsed();
      if (elapsed >= next_warning) {
        on_long_wait(elapsed);
        next_warning = elapsed + warn_every;
      }
    }
    backoff.pause();
  }
}

}  // namespace shm
}  // namespace groupcoord
