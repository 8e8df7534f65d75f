#include "core/wake_word.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <utility>

namespace groupcoord {
namespace shm {

/// The innermost ScopedWaitInterrupt's check of this thread, or null.
thread_local const std::function<void()>* t_interrupt = nullptr;

namespace {

std::uint32_t* futex_address(std::atomic<std::uint32_t>& word) {
  // std::atomic<uint32_t> is lock-free and has the layout of a uint32_t (static_assert in the
  // header): the kernel reads the same four bytes.
  return reinterpret_cast<std::uint32_t*>(&word);
}

/// Sleeps while `word` still holds `expected`, at most `limit`. Spurious returns are fine: the
/// caller re-checks its condition.
void futex_sleep(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                 std::chrono::nanoseconds limit) {
  if (limit <= std::chrono::nanoseconds::zero()) return;
  timespec timeout{};
  timeout.tv_sec = static_cast<time_t>(limit.count() / 1000000000);
  timeout.tv_nsec = static_cast<long>(limit.count() % 1000000000);
  ::syscall(SYS_futex, futex_address(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

/// Counts the caller among the sleepers for its lifetime (also when the condition throws).
class SleeperCount {
 public:
  explicit SleeperCount(WakeWord& word) : word_(word) {
    word_.sleepers.fetch_add(1, std::memory_order_seq_cst);
    // The waiter's half of the barrier pair (the header): its next look at the condition comes
    // after the count is visible, also where a seq_cst RMW alone would not order a later
    // acquire load (the C++ model; x86 and ARMv8 already do).
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  ~SleeperCount() { word_.sleepers.fetch_sub(1, std::memory_order_relaxed); }
  SleeperCount(const SleeperCount&) = delete;
  SleeperCount& operator=(const SleeperCount&) = delete;

 private:
  WakeWord& word_;
};

}  // namespace

bool wait_on(WakeWord& word, const std::function<bool()>& ready, const Deadline& deadline,
             const std::function<void(std::chrono::milliseconds)>& on_long_wait,
             std::chrono::milliseconds warn_every, const WaitTuning& tuning, WaitPacing* pacing) {
  for (std::uint32_t i = 0; i < tuning.spins; ++i) {
    if (ready()) {
      if (pacing != nullptr) pacing->record(WaitPacing::Duration::zero());  // back to back
      return true;
    }
    cpu_relax();
  }
  // The clock only from here: the back-to-back path above reads none.
  const auto start = std::chrono::steady_clock::now();
  auto done = [&] {
    if (pacing != nullptr) pacing->record(std::chrono::steady_clock::now() - start);
    return true;
  };
  WaitPacing::Window window{};
  const bool paced = pacing != nullptr && pacing->window(&window);
  const auto yield_until = start + tuning.yield_for;
  auto next_warning = warn_every;
  for (;;) {
    if (ready()) return done();
    if (deadline.expired()) {
      if (ready()) return done();  // one last look: the state may have just changed
      if (pacing != nullptr) pacing->forget();
      return false;
    }
    const auto elapsed = deadline.elapsed();
    if (on_long_wait && warn_every.count() > 0 && elapsed >= next_warning) {
      on_long_wait(elapsed);
      next_warning = elapsed + warn_every;
    }
    const auto now = std::chrono::steady_clock::now();
    const auto waited = now - start;
    // Poll (yielding the core to an oversubscribed peer) right after the spin, and inside the
    // window where the pacing expects the condition.
    if (now < yield_until) {
      sched_yield();
      continue;
    }
    if (paced && waited >= window.wake_at && waited < window.poll_until) {
      if (t_interrupt != nullptr) (*t_interrupt)();  // a window may last milliseconds
      sched_yield();
      continue;
    }
    // Sleep until rung, the deadline, the next warning, tuning.max_sleep or the pacing's window,
    // whichever is first.
    std::chrono::nanoseconds limit = tuning.max_sleep;
    limit = std::min<std::chrono::nanoseconds>(limit, deadline.remaining_precise());
    if (on_long_wait && warn_every.count() > 0) {
      limit = std::min<std::chrono::nanoseconds>(limit, next_warning - elapsed);
    }
    const bool until_window = paced && waited < window.wake_at;
    if (until_window) limit = std::min<std::chrono::nanoseconds>(limit, window.wake_at - waited);
    if (t_interrupt != nullptr) (*t_interrupt)();  // may throw: the wait ends
    const std::uint32_t sequence = word.sequence.load(std::memory_order_acquire);
    SleeperCount counted(word);
    if (ready()) return done();
    futex_sleep(word.sequence, sequence, limit);
    if (until_window) {
      const auto late = std::chrono::steady_clock::now() - start - window.wake_at;
      if (late > WaitPacing::Duration::zero()) pacing->record_lateness(late);
    }
  }
}

void notify_waiters(WakeWord& word) {
  // Orders the caller's publishing store before the read of the sleeper count (the other half of
  // the barrier pair described in the header).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (word.sleepers.load(std::memory_order_relaxed) == 0) return;
  word.sequence.fetch_add(1, std::memory_order_release);
  ::syscall(SYS_futex, futex_address(word.sequence), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace shm

ScopedWaitInterrupt::ScopedWaitInterrupt(std::function<void()> check)
    : check_(std::move(check)), previous_(shm::t_interrupt) {
  shm::t_interrupt = &check_;
}

ScopedWaitInterrupt::~ScopedWaitInterrupt() { shm::t_interrupt = previous_; }

}  // namespace groupcoord
