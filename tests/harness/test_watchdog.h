// Ends a hung multi-process test: a thread that watches the running test's start time and exits
// the process with a message naming the test and rank once its deadline
// (GROUPCOORD_TEST_DEADLINE_S, default 120 s) has passed.
#pragma once

#include <gtest/gtest.h>

#include <chrono>

namespace groupcoord {
namespace testing {

/// gtest listener that feeds test starts and ends to the watchdog thread.
class TestWatchdog : public ::testing::EmptyTestEventListener {
 public:
  TestWatchdog(int rank, std::chrono::seconds deadline);
  ~TestWatchdog() override;
  void OnTestStart(const ::testing::TestInfo& info) override;
  void OnTestEnd(const ::testing::TestInfo& info) override;

 private:
  struct State;
  State* state_;
};

/// Time left before the current test's deadline (at least 1 ms); the full deadline outside a test.
std::chrono::milliseconds remaining_test_time();

/// The per-test deadline in force.
std::chrono::seconds test_deadline();

}  // namespace testing
}  // namespace groupcoord
