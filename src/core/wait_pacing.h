// When a waiter's condition tends to come true, learnt from its last waits, so that after a
// regular pause (an engine's step) the waiter is already awake and polling when the peer
// publishes, instead of sleeping in the kernel and paying the wake-up of a sleeping core.
//
// Why: a futex wake-up across cores costs 30-80 µs on a VM whose idle vCPUs halt (the waker's
// FUTEX_WAKE sends an inter-processor interrupt, a VM exit; docs/benchmarks/paced_waits.md), so a
// queue reader that sleeps through every step answers that much late. Spinning through the whole
// pause (vLLM's queue yields for a second after every read) answers at once but keeps a core
// busy. Between the two: when the last waits lasted about the same time (the writer's steps are
// regular), sleep until shortly before the earliest of them would end, a timer that fires on the
// waiter's own core before the message is due, then poll until a little after. The poll costs
// at most 3/8 of a core (3 ms per pause at most) while the steps go on, usually far less (it ends
// when the message comes); a wait that reaches its deadline forgets the pattern, so an idle waiter
// polls at most one window, and irregular ones sleep as before.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>

namespace groupcoord {
namespace shm {

/// Per-waiter record of recent wait lengths and the window it predicts. One thread at a time. Used
/// by the message queue's readers (shm/ring_reader.h) and the CPU group's shared-memory
/// collectives (process_group/shm_collectives.h).
class WaitPacing {
 public:
  using Duration = std::chrono::nanoseconds;

  /// Where the next wait should be awake and polling, measured from its start.
  struct Window {
    Duration wake_at;     ///< sleep (woken early only by a publisher) until then; zero: no sleep
    Duration poll_until;  ///< then poll without sleeping until then
  };

  /// Waits this many in a row of about the same length make a prediction.
  static constexpr std::size_t kHistory = 4;
  /// Waits shorter than this are back-to-back traffic: the caller's spin takes them, and they
  /// break a pattern of pauses. The default yield phase of a wait (WaitTuning::yield_for): a
  /// longer wait goes to sleep, so from there on a prediction is worth having.
  static constexpr Duration kShortest = std::chrono::microseconds(200);
  /// With ShortWaits::kIgnore, the shortest wait recorded at all. Longer than kShortest: between
  /// the steps of one call a waiter may wait a few hundred µs when the machine is loaded, and
  /// those waits would make the pattern of pauses irregular (measured with one of the two cores
  /// busy: at 200 µs the CPU group's test saw no pacing, at 250 µs it paced every time).
  static constexpr Duration kShortestIgnored = std::chrono::microseconds(250);
  /// Poll this much before the expected end, besides the spread of the waits and the measured
  /// lateness of the sleep before it (250 µs: on the 2-core VM a timed sleep of a few ms ended
  /// 100-250 µs late often enough that 100 µs missed most windows), and at most kMaxLead or an
  /// eighth of the pause (beyond that the poll costs more than it saves).
  static constexpr Duration kMinLead = std::chrono::microseconds(250);
  static constexpr Duration kMaxLead = std::chrono::microseconds(1000);

  /// What a short wait does to the pattern.
  enum class ShortWaits {
    /// Ends it (a wait under kShortest): a queue reader's short waits are back-to-back
    /// messages, not pauses.
    kBreakThePattern,
    /// Nothing, it is not recorded (a wait under kShortestIgnored): the CPU group's calls take
    /// several steps, and the waits between the steps of a call (or between the calls of one
    /// engine step, as broadcast_object's size and payload) are short; recorded, they would hide
    /// the pauses between calls for good.
    kIgnore,
  };

  /// `enabled`: false makes window() never predict (GROUPCOORD_WAIT_PACING=0 does that for the
  /// default).
  explicit WaitPacing(bool enabled = enabled_by_default(),
                      ShortWaits short_waits = ShortWaits::kBreakThePattern);

  /// The window for a wait that starts now; false when the last waits were not regular.
  bool window(Window* out) const;
  /// Records how long a finished wait took (from its start to its condition being true); a wait
  /// shorter than kShortestIgnored is dropped with ShortWaits::kIgnore.
  void record(Duration waited);
  /// Drops the recorded waits (a wait that ended at its deadline: the pattern is gone, and an
  /// idle caller that waits again and again with a timeout must not poll before each).
  void forget();
  /// Records how late a sleep that was to end at the window's start really ended: the lead
  /// covers it from then on (a halted vCPU's timer can fire 100 µs and more late).
  void record_lateness(Duration late);

  /// False when GROUPCOORD_WAIT_PACING is 0.
  static bool enabled_by_default();

 private:
  bool enabled_;
  ShortWaits short_waits_;
  std::array<Duration, kHistory> recent_{};
  std::size_t count_ = 0;  ///< waits recorded, saturating at kHistory
  std::size_t next_ = 0;   ///< where the next one goes
  Duration lateness_{};    ///< recent lateness of the sleep before a window (a decaying maximum)
};

}  // namespace shm
}  // namespace groupcoord
