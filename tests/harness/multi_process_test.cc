#include "multi_process_test.h"

#include <sstream>
#include <string>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/prefix_store.h"
#include "test_watchdog.h"

namespace groupcoord {
namespace testing {

namespace {

TestWorld& world_slot() {
  static TestWorld world;
  return world;
}

long next_test_sequence() {
  static long sequence = 0;
  return ++sequence;
}

}  // namespace

const TestWorld& test_world() { return world_slot(); }

namespace detail {
void set_test_world(TestWorld world) { world_slot() = std::move(world); }
void clear_test_world() { world_slot() = TestWorld{}; }
}  // namespace detail

void MultiProcessTest::SetUp() {
  // Every rank runs the same tests in the same order, so sequence numbers agree across ranks.
  sequence_ = next_test_sequence();
  test_store_ = std::make_shared<PrefixStore>("test/" + std::to_string(sequence_),
                                              test_world().rendezvous.store);
}

void MultiProcessTest::TearDown() {
  // Publish this rank's verdict, then read everybody's. The wait is bounded by what is left of
  // the test's deadline, so a hung peer shows up as a failure here, not as a hang.
  Store& store = *test_world().rendezvous.store;
  const std::string prefix = "harness/verdict/" + std::to_string(sequence_) + "/";
  store.set(prefix + std::to_string(rank()), HasFailure() ? "fail" : "pass");

  std::vector<std::string> failed_ranks;
  for (int r = 0; r < world_size(); ++r) {
    const std::string key = prefix + std::to_string(r);
    try {
      store.wait({key}, remaining_test_time());
      if (store.get(key) == "fail") failed_ranks.push_back(std::to_string(r));
    } catch (const TimeoutError&) {
      failed_ranks.push_back(std::to_string(r) + " (did not finish)");
    }
  }
  if (failed_ranks.empty() || HasFailure()) return;
  std::ostringstream names;
  for (std::size_t i = 0; i < failed_ranks.size(); ++i) names << (i ? ", " : "") << failed_ranks[i];
  ADD_FAILURE() << "test failed on rank(s) " << names.str() << " of " << world_size();
}

}  // namespace testing
}  // namespace groupcoord
