#include "test_watchdog.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace groupcoord {
namespace testing {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<long long> g_deadline_ns{0};  // steady-clock deadline of the running test, 0 = none
std::chrono::seconds g_deadline_length{120};

}  // namespace

struct TestWatchdog::State {
  int rank = 0;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::string current_test;
  std::thread thread;
};

std::chrono::seconds test_deadline() { return g_deadline_length; }

std::chrono::milliseconds remaining_test_time() {
  long long deadline = g_deadline_ns.load();
  if (deadline == 0) return g_deadline_length;
  auto left = std::chrono::nanoseconds(deadline) - Clock::now().time_since_epoch();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left);
  return ms.count() > 0 ? ms : std::chrono::milliseconds(1);
}

TestWatchdog::TestWatchdog(int rank, std::chrono::seconds deadline) : state_(new State) {
  state_->rank = rank;
  g_deadline_length = deadline;
  state_->thread = std::thread([state = state_] {
    std::unique_lock<std::mutex> lock(state->mutex);
    while (!state->stopping) {
      state->wake.wait_for(lock, std::chrono::milliseconds(200));
      long long deadline_ns = g_deadline_ns.load();
      if (deadline_ns == 0 || Clock::now().time_since_epoch().count() < deadline_ns) continue;
      // A hung collective never returns; exiting is the only way to free the job. _exit skips
      // destructors that could block on the very peers that hang.
      std::fprintf(stderr, "\n[harness rank %d] test %s exceeded its %lld s deadline; exiting\n",
                   state->rank, state->current_test.c_str(),
                   static_cast<long long>(g_deadline_length.count()));
      std::fflush(stderr);
      _exit(124);
    }
  });
}

TestWatchdog::~TestWatchdog() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
  delete state_;
}

void TestWatchdog::OnTestStart(const ::testing::TestInfo& info) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->current_test = std::string(info.test_suite_name()) + "." + info.name();
  g_deadline_ns = (Clock::now() + g_deadline_length).time_since_epoch().count();
}

void TestWatchdog::OnTestEnd(const ::testing::TestInfo& info) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  g_deadline_ns = 0;
}

}  // namespace testing
}  // namespace groupcoord
