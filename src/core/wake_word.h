// Waiting on shared memory that wakes in microseconds after any idle gap and costs no CPU while
// idle: spin briefly, then sleep in the kernel (futex) on a word of the shared mapping until the
// side that changes the awaited state rings it.
//
// Why: a wait that only spins, yields and sleeps with growing timeouts (the earlier waits, up to
// 1 ms) wakes up to its longest sleep late; an engine's queue sits idle for milliseconds between
// steps, so every step paid that delay. A futex sleep ends when the other side's store is
// followed by a wake-up, whatever the gap.
//
// The protocol (one WakeWord shared by every waiter of one kind of event):
//   waiter: read `sequence`; count itself in `sleepers` (a full barrier); check the condition once
//           more; if still false, futex-wait while `sequence` is unchanged; uncount itself.
//   waker:  store the new state (release); full fence; if `sleepers` is non-zero, bump
//           `sequence` and futex-wake everyone.
// Either the waker sees the sleeper's count, or the sleeper's last check sees the new state (the
// two full barriers order them); if the waker bumps `sequence` between the sleeper's read and
// its futex call, the kernel refuses to sleep (the value changed). With nobody asleep the waker
// makes no system call: back-to-back traffic stays in user space.
//
// The futex is the shared (not process-private) kind, keyed by the physical page, so it works
// across processes mapping the same segment. Every sleep is bounded (WaitTuning::max_sleep, the
// deadline, the next long-wait warning), so a waiter whose peer died still runs its condition,
// which checks for dead peers, several times a second, and deadlines fire on time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "core/deadline.h"
#include "core/wait_pacing.h"
#include "groupcoord/wait_interrupt.h"

namespace groupcoord {
namespace shm {

/// The futex word and its sleeper count, on its own cache line in a shared segment. Zero-filled
/// memory is a valid initial state.
struct alignas(64) WakeWord {
  std::atomic<std::uint32_t> sequence;  ///< bumped by every wake-up that finds sleepers
  std::atomic<std::uint32_t> sleepers;  ///< waiters about to sleep or asleep
};

static_assert(std::atomic<std::uint32_t>::is_always_lock_free,
              "a futex word must be a lock-free 32-bit atomic");

/// How a wait spins before it sleeps.
struct WaitTuning {
  /// Busy polls (with the CPU's pause hint) before anything else: a peer already on its way
  /// answers within these (~1 µs).
  std::uint32_t spins = 64;
  /// Then sched_yield between polls for this long before sleeping: a message that follows within
  /// it is taken without a system call on either side (back-to-back traffic and short pauses),
  /// and the yield lets an oversubscribed peer run. 200 µs: on the 2-core VM a futex wake-up took
  /// 10-50 µs, so shorter pauses are cheaper to wait out; an idle reader still sleeps after
  /// 200 µs (0.3 % of a core while idle; docs/benchmarks/paced_waits.md).
  std::chrono::microseconds yield_for{200};
  /// Longest single sleep: how often a sleeping waiter re-runs its condition (dead-peer checks).
  std::chrono::milliseconds max_sleep{20};
};

/// Polls `ready` (spin, yield, then futex sleeps on `word`; the thread's ScopedWaitInterrupt check,
/// groupcoord/wait_interrupt.h, before each sleep) until it returns true (returns true)
/// or `deadline` expires (returns false after one last look). Exceptions from `ready` propagate.
/// Every `warn_every` of waiting, `on_long_wait(elapsed)` is called (may be empty).
/// With `pacing`, the wait records its length there, and when the last ones were regular it
/// wakes before the expected end and polls through it (core/wait_pacing.h).
bool wait_on(WakeWord& word, const std::function<bool()>& ready, const Deadline& deadline,
             const std::function<void(std::chrono::milliseconds)>& on_long_wait = {},
             std::chrono::milliseconds warn_every = std::chrono::seconds(60),
             const WaitTuning& tuning = WaitTuning(), WaitPacing* pacing = nullptr);

/// Wakes the waiters of `word` after the caller published a change (with a release store or
/// stronger): no system call unless someone sleeps.
void notify_waiters(WakeWord& word);

}  // namespace shm
}  // namespace groupcoord
