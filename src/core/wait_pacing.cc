#include "core/wait_pacing.h"

#include <algorithm>

#include "core/env_switch.h"

namespace groupcoord {
namespace shm {

WaitPacing::WaitPacing(bool enabled, ShortWaits short_waits)
    : enabled_(enabled), short_waits_(short_waits) {}

bool WaitPacing::enabled_by_default() {
  static const bool enabled = env_switch_on("GROUPCOORD_WAIT_PACING");
  return enabled;
}

bool WaitPacing::window(Window* out) const {
  if (!enabled_ || count_ < kHistory) return false;
  const auto [low, high] = std::minmax_element(recent_.begin(), recent_.end());
  if (*low < kShortest) return false;
  // Regular: the spread is small against the pause (an eighth of it) and at most kMaxLead, or the
  // poll it needs would cost more than it saves.
  const Duration spread = *high - *low;
  if (spread * 8 > *low || spread > kMaxLead) return false;
  // At most an eighth of the pause on either side: the window (spread + 2 leads) is then at most
  // 3/8 of the pause and 3 ms, however short or long the pauses (measured: 1 ms pauses, 46 % of a
  // core with a 250 µs lead and no cap).
  const Duration full_lead = std::min(spread + lateness_ + kMinLead, kMaxLead);
  const Duration lead = std::min(full_lead, *low / 8);
  out->wake_at = *low - lead;
  out->poll_until = *high + lead;
  // Short pauses (up to about half a millisecond): the sleep between the yield phase and the
  // window would be shorter than the timer can be trusted with (kMinLead and its measured
  // lateness, at most kMaxLead), so it would mostly end after the message and cost a wake-up
  // anyway. Poll through the whole wait instead, and past its latest length by the full lead:
  // at such a pace the yield phase already holds the core for most of each pause (77 % of one at
  // 200 µs pauses, session 12), and the rest buys the wake-up (15-80 µs on the VM).
  if (out->wake_at < kShortest + std::min(kMinLead + lateness_, kMaxLead)) {
    out->wake_at = Duration::zero();
    out->poll_until = *high + full_lead;
  }
  return true;
}

void WaitPacing::record(Duration waited) {
  if (waited < kShortestIgnored && short_waits_ == ShortWaits::kIgnore) return;
  recent_[next_] = waited;
  next_ = (next_ + 1) % kHistory;
  count_ = std::min(count_ + 1, kHistory);
}

void WaitPacing::forget() { count_ = 0; }

void WaitPacing::record_lateness(Duration late) {
  // A decaying maximum: one late wake-up widens the next windows at once, and the lead shrinks
  // back by an eighth per window once the timer is punctual again.
  lateness_ = std::max(late, lateness_ - lateness_ / 8);
}

}  // namespace shm
}  // namespace groupcoord
