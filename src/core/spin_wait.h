// Waiting on shared-memory flags without burning the machine: spin briefly (the peer is usually
// a few hundred nanoseconds away), then yield the core, then sleep in growing steps up to ~1 ms.
// Oversubscribed runs (more ranks than cores, as in CI) need the yield and sleep phases, or the
// spinning waiter steals the core from the very process it waits for.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace groupcoord {
namespace shm {

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

/// Backoff between polls of a flag: spin a few times, then yield the core until kYieldFor has
/// passed since the first pause, then sleep (doubling up to kMaxSleep). The yield phase is
/// bounded in time, not in calls: on a loaded machine each yield may cost a whole time slice.
class Backoff {
 public:
  /// Busy polls before yielding (a few microseconds).
  static constexpr std::uint32_t kSpins = 64;
  /// How long to keep yielding before sleeping.
  static constexpr std::chrono::microseconds kYieldFor{200};
  /// Longest sleep between two polls: bounds the latency a long wait adds to the next message.
  static constexpr std::chrono::microseconds kMaxSleep{1000};

  /// Waits a little; each call waits as long as or longer than the previous one.
  void pause();
  /// Back to spinning (after progress was made).
  void reset() { steps_ = 0; }

 private:
  std::uint32_t steps_ = 0;
  std::uint32_t sleeps_ = 0;
  std::chrono::steady_clock::time_point yield_until_;
};

/// Polls `ready` with Backoff until it returns true (returns true) or `deadline` expires
/// (returns false). `ready` is always evaluated at least once, so an expired deadline still
/// reports a condition that already holds. Every `warn_every`, `on_long_wait(elapsed)` is called
/// (for a log line naming what is awaited); pass an empty function to stay silent.
bool spin_until(const std::function<bool()>& ready, const Deadline& deadline,
                const std::function<void(std::chrono::milliseconds)>& on_long_wait = {},
                std::chrono::milliseconds warn_every = std::chrono::seconds(60));

}  // namespace shm
}  // namespace groupcoord
