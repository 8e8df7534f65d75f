// core/wake_word.h: a sleeping waiter is woken by notify_waiters at once (not by its periodic
// re-check), across processes on a shared mapping; a waiter nobody rings still re-checks its
// condition and meets its deadline; long-wait warnings fire while it sleeps; notify makes no
// system call when nobody sleeps.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <new>
#include <thread>

#include "core/wake_word.h"

namespace groupcoord {
namespace testing {
namespace {

using shm::Deadline;
using shm::WaitTuning;
using shm::WakeWord;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// Sleeps at most this long between checks: far longer than any wake-up measured below, so a
/// prompt return can only come from the futex wake-up.
WaitTuning sleepy() {
  WaitTuning tuning;
  tuning.yield_for = std::chrono::microseconds(0);
  tuning.max_sleep = milliseconds(5000);
  return tuning;
}

TEST(WakeWord, ASleepingWaiterWakesWhenRungNotAtItsNextCheck) {
  WakeWord word{};
  std::atomic<bool> flag{false};
  double waited_ms = 0;
  std::thread waiter([&] {
    const auto start = Clock::now();
    EXPECT_TRUE(shm::wait_on(
        word, [&] { return flag.load(std::memory_order_acquire); }, Deadline(milliseconds(20000)),
        {}, milliseconds(60000), sleepy()));
    waited_ms = ms_since(start);
  });
  std::this_thread::sleep_for(milliseconds(100));  // the waiter is asleep in the kernel by now
  EXPECT_EQ(word.sleepers.load(), 1u);
  flag.store(true, std::memory_order_release);
  shm::notify_waiters(word);
  waiter.join();
  EXPECT_LT(waited_ms, 100 + 1000) << "woken by its periodic check, not by the futex";
  EXPECT_EQ(word.sleepers.load(), 0u);
  EXPECT_EQ(word.sequence.load(), 1u) << "one wake-up for one sleeper";
}

TEST(WakeWord, NoWakeUpWhenNobodySleeps) {
  WakeWord word{};
  for (int i = 0; i < 100; ++i) shm::notify_waiters(word);
  EXPECT_EQ(word.sequence.load(), 0u) << "the publisher rang with nobody asleep";
}

TEST(WakeWord, WakesAcrossProcessesOnASharedMapping) {
  void* memory = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  auto* word = new (memory) WakeWord{};
  auto* flag = new (static_cast<char*>(memory) + 64) std::atomic<std::uint32_t>{0};
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the publisher
    std::this_thread::sleep_for(milliseconds(100));
    flag->store(1, std::memory_order_release);
    shm::notify_waiters(*word);
    ::_exit(0);
  }
  const auto start = Clock::now();
  EXPECT_TRUE(shm::wait_on(
      *word, [&] { return flag->load(std::memory_order_acquire) == 1; },
      Deadline(milliseconds(20000)), {}, milliseconds(60000), sleepy()));
  EXPECT_LT(ms_since(start), 1000) << "the other process's wake-up did not reach this one";
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::munmap(memory, 4096);
}

TEST(WakeWord, AnUnrungWaiterStillSeesItsConditionAndItsDeadline) {
  // Nobody rings: the condition turns true on its own (as a peer's death does); the waiter sees it
  // at its next check (max_sleep), and a waiter whose condition never holds returns at the
  // deadline even though its sleeps would be longer.
  WakeWord word{};
  WaitTuning tuning;
  tuning.yield_for = std::chrono::microseconds(0);
  tuning.max_sleep = milliseconds(20);
  const auto start = Clock::now();
  EXPECT_TRUE(shm::wait_on(
      word, [&] { return ms_since(start) > 50; }, Deadline(milliseconds(5000)), {},
      milliseconds(60000), tuning));
  EXPECT_LT(ms_since(start), 50 + 200);

  const auto begun = Clock::now();
  EXPECT_FALSE(shm::wait_on(
      word, [] { return false; }, Deadline(milliseconds(80)), {}, milliseconds(60000), sleepy()));
  EXPECT_GE(ms_since(begun), 80);
  EXPECT_LT(ms_since(begun), 80 + 500) << "slept past the deadline";
}

TEST(WakeWord, LongWaitWarningsFireWhileAsleep) {
  WakeWord word{};
  int warnings = 0;
  shm::wait_on(
      word, [] { return false; }, Deadline(milliseconds(120)), [&](milliseconds) { ++warnings; },
      milliseconds(25), sleepy());
  EXPECT_GE(warnings, 3) << "a sleep outlasted the warning interval";
}

// ---- core/wait_pacing.h ------------------------------------------------------------------

using shm::WaitPacing;
using std::chrono::microseconds;

void record_all(WaitPacing& pacing, std::initializer_list<long> waits_us) {
  for (long us : waits_us) pacing.record(microseconds(us));
}

TEST(WaitPacing, PredictsAWindowOnlyAfterRegularPauses) {
  WaitPacing pacing(/*enabled=*/true);
  WaitPacing::Window window{};
  record_all(pacing, {2000, 2040, 2010});
  EXPECT_FALSE(pacing.window(&window)) << "three waits are not a pattern yet";
  pacing.record(microseconds(2020));
  ASSERT_TRUE(pacing.window(&window));
  // Lead = spread (40 µs) + kMinLead, at most an eighth of the pause, before the earliest and
  // after the latest.
  const WaitPacing::Duration lead = std::min<WaitPacing::Duration>(
      microseconds(40) + WaitPacing::kMinLead, microseconds(2000) / 8);
  EXPECT_EQ(window.wake_at, microseconds(2000) - lead);
  EXPECT_EQ(window.poll_until, microseconds(2040) + lead);
  // One back-to-back message breaks the pattern; so does a wait far off the others.
  pacing.record(microseconds(0));
  EXPECT_FALSE(pacing.window(&window));
  record_all(pacing, {2000, 2000, 2000, 2000});
  EXPECT_TRUE(pacing.window(&window));
  pacing.record(microseconds(5000));
  EXPECT_FALSE(pacing.window(&window)) << "irregular: a spread of 3 ms on 2 ms pauses";
  // Long pauses: a spread within an eighth of them but over kMaxLead makes no window either (it
  // would poll for that long every time).
  record_all(pacing, {100000, 100000, 100000, 110000});
  EXPECT_FALSE(pacing.window(&window));
  // Disabled: never a window.
  WaitPacing off(/*enabled=*/false);
  record_all(off, {2000, 2000, 2000, 2000});
  EXPECT_FALSE(off.window(&window));
}

TEST(WaitPacing, ShortRegularPausesArePolledThroughWithoutASleep) {
  WaitPacing pacing(/*enabled=*/true);
  WaitPacing::Window window{};
  // 200 µs pauses as a writer's sleep_for makes them (the timer's slack on top): no sleep, a poll
  // from the start until past the latest wait by the full lead.
  record_all(pacing, {250, 262, 255, 251});
  ASSERT_TRUE(pacing.window(&window));
  EXPECT_EQ(window.wake_at, WaitPacing::Duration::zero());
  EXPECT_EQ(window.poll_until, microseconds(262) + microseconds(12) + WaitPacing::kMinLead);
  // A wait under kShortest (the yield phase takes it) is no such pause: it breaks the pattern.
  pacing.record(microseconds(150));
  EXPECT_FALSE(pacing.window(&window));
  // From about a millisecond on, the waiter sleeps until shortly before the window again.
  record_all(pacing, {1000, 1000, 1000, 1000});
  ASSERT_TRUE(pacing.window(&window));
  EXPECT_EQ(window.wake_at, microseconds(1000) - microseconds(1000) / 8);
}

TEST(WaitPacing, ALateWakeUpWidensTheLeadWhichThenShrinksBack) {
  WaitPacing pacing(/*enabled=*/true);
  record_all(pacing, {20000, 20000, 20000, 20000});
  WaitPacing::Window window{};
  ASSERT_TRUE(pacing.window(&window));
  EXPECT_EQ(window.wake_at, microseconds(20000) - WaitPacing::kMinLead);
  pacing.record_lateness(microseconds(400));
  ASSERT_TRUE(pacing.window(&window));
  EXPECT_EQ(window.wake_at, microseconds(20000) - WaitPacing::kMinLead - microseconds(400));
  pacing.record_lateness(microseconds(0));  // punctual: an eighth less
  ASSERT_TRUE(pacing.window(&window));
  EXPECT_EQ(window.wake_at, microseconds(20000) - WaitPacing::kMinLead - microseconds(350));
  pacing.record_lateness(microseconds(50000));  // never more than kMaxLead
  ASSERT_TRUE(pacing.window(&window));
  EXPECT_EQ(window.wake_at, microseconds(20000) - WaitPacing::kMaxLead);
}

TEST(WakeWord, APacedWaiterSleepsUntilItsWindowAndPollsThroughIt) {
  // Four waits of 100-100.8 ms recorded: the next wait sleeps until 99 ms (the earliest less a
  // lead of 1 ms), then polls, not counted as a sleeper, until 101.8 ms. Checked at 30 ms
  // (asleep) and every 100 µs inside the window (polling at least once), on the waiter's own
  // start time; a few tries, since a loaded machine may start the window late.
  int seen = 0;
  for (int attempt = 0; attempt < 5 && seen == 0; ++attempt) {
    WakeWord word{};
    std::atomic<bool> flag{false};
    std::atomic<Clock::rep> started{0};
    WaitPacing pacing(/*enabled=*/true);
    record_all(pacing, {100000, 100000, 100000, 100800});
    std::thread waiter([&] {
      started.store(Clock::now().time_since_epoch().count());
      EXPECT_TRUE(shm::wait_on(
          word, [&] { return flag.load(std::memory_order_acquire); }, Deadline(milliseconds(20000)),
          {}, milliseconds(60000), sleepy(), &pacing));
    });
    while (started.load() == 0) std::this_thread::yield();
    const Clock::time_point start{Clock::duration(started.load())};
    std::this_thread::sleep_until(start + milliseconds(30));
    const bool asleep_before = word.sleepers.load() == 1;
    bool polling_inside = false;
    for (auto at = start + microseconds(99200); at < start + microseconds(101700);
         at += microseconds(100)) {
      std::this_thread::sleep_until(at);
      if (word.sleepers.load() == 0) polling_inside = true;
    }
    flag.store(true, std::memory_order_release);
    shm::notify_waiters(word);
    waiter.join();
    if (asleep_before && polling_inside) ++seen;
  }
  EXPECT_EQ(seen, 1) << "asleep before the window and polling inside it";
}

TEST(WakeWord, AWaitThatReachesItsDeadlineForgetsThePattern) {
  WakeWord word{};
  WaitPacing pacing(/*enabled=*/true);
  record_all(pacing, {5000, 5000, 5000, 5000});
  WaitPacing::Window window{};
  ASSERT_TRUE(pacing.window(&window));
  EXPECT_FALSE(shm::wait_on(
      word, [] { return false; }, Deadline(milliseconds(20)), {}, milliseconds(60000), sleepy(),
      &pacing));
  EXPECT_FALSE(pacing.window(&window)) << "an idle caller waiting again would poll again";
}

TEST(WakeWord, AMessageBeforeThePacedWindowStillWakesTheWaiterAtOnce) {
  WakeWord word{};
  std::atomic<bool> flag{false};
  WaitPacing pacing(/*enabled=*/true);
  for (int i = 0; i < 4; ++i) pacing.record(milliseconds(500));  // expects 500 ms pauses
  double waited_ms = 0;
  std::thread waiter([&] {
    const auto start = Clock::now();
    EXPECT_TRUE(shm::wait_on(
        word, [&] { return flag.load(std::memory_order_acquire); }, Deadline(milliseconds(20000)),
        {}, milliseconds(60000), sleepy(), &pacing));
    waited_ms = ms_since(start);
  });
  std::this_thread::sleep_for(milliseconds(20));
  flag.store(true, std::memory_order_release);
  shm::notify_waiters(word);
  waiter.join();
  EXPECT_LT(waited_ms, 20 + 200) << "woken by the futex, not at the window 500 ms later";
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
