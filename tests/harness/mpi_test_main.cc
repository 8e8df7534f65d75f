// gtest main for multi-process tests. Started as `mpirun -np N test_binary` (or under torchrun /
// srun): finds its peers through groupcoord's own rendezvous (env://), builds the world process
// group, runs the tests with a per-test deadline, and makes the exit code reflect every rank.
//
// Environment:
//   GROUPCOORD_TEST_DEADLINE_S   per-test deadline in seconds (default 120)
//   GROUPCOORD_TEST_TIMEOUT_S    timeout of the world group and store waits (default 60)
//   GROUPCOORD_TEST_ALL_RANKS_OUTPUT=1  full gtest output from every rank, not only rank 0
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "groupcoord/errors.h"
#include "groupcoord/process_group.h"
#include "groupcoord/rendezvous.h"
#include "multi_process_test.h"
#include "test_watchdog.h"

namespace {

using groupcoord::testing::TestWorld;

long env_seconds(const char* name, long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  long value = std::strtol(text, nullptr, 10);
  return value > 0 ? value : fallback;
}

// Ranks other than 0 print only their failures, prefixed with the rank, so the log stays readable.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
};

TestWorld set_up_world(std::chrono::seconds timeout) {
  groupcoord::RendezvousOptions options;
  options.timeout = timeout;
  TestWorld world;
  world.rendezvous = groupcoord::rendezvous(options);
  groupcoord::ProcessGroupOptions group_options;
  group_options.name = "world";
  group_options.timeout = timeout;
  group_options.single_node = world.rendezvous.single_node;
  world.world_group = groupcoord::ProcessGroup::create_world(
      world.rendezvous.store, world.rendezvous.rank, world.rendezvous.world_size, group_options);
  return world;
}

// Every rank publishes its exit code; the job fails if any rank failed.
int combine_exit_codes(const TestWorld& world, int local_code, std::chrono::seconds timeout) {
  auto& store = *world.rendezvous.store;
  const int size = world.rendezvous.world_size;
  store.set("harness/exit/" + std::to_string(world.rendezvous.rank), std::to_string(local_code));
  int combined = local_code;
  for (int r = 0; r < size; ++r) {
    const std::string key = "harness/exit/" + std::to_string(r);
    try {
      store.wait({key}, timeout);
      if (store.get(key) != "0") combined = 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[harness rank %d] rank %d did not report its result: %s\n",
                   world.rendezvous.rank, r, e.what());
      combined = 1;
    }
  }
  return combined;
}

// Rank 0 hosts the store server in-process: it must outlive every other rank's last store call.
void wait_until_all_ranks_are_done(const TestWorld& world, std::chrono::seconds timeout) {
  auto& store = *world.rendezvous.store;
  store.set("harness/done/" + std::to_string(world.rendezvous.rank), "1");
  if (world.rendezvous.rank != 0) return;
  for (int r = 0; r < world.rendezvous.world_size; ++r) {
    try {
      store.wait({"harness/done/" + std::to_string(r)}, timeout);
    } catch (const std::exception&) {
      // Already reported by combine_exit_codes; do not block the exit any longer.
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto deadline = std::chrono::seconds(env_seconds("GROUPCOORD_TEST_DEADLINE_S", 120));
  const auto timeout = std::chrono::seconds(env_seconds("GROUPCOORD_TEST_TIMEOUT_S", 60));

  TestWorld world;
  try {
    world = set_up_world(timeout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[harness] could not set up the test world: %s\n", e.what());
    return 2;
  }
  const int rank = world.rendezvous.rank;

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  const char* all_output = std::getenv("GROUPCOORD_TEST_ALL_RANKS_OUTPUT");
  if (rank != 0 && !(all_output && std::string(all_output) == "1")) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  listeners.Append(new groupcoord::testing::TestWatchdog(rank, deadline));
  groupcoord::testing::detail::set_test_world(world);

  int local_code = RUN_ALL_TESTS();
  int code = combine_exit_codes(world, local_code, timeout);
  wait_until_all_ranks_are_done(world, timeout);

  groupcoord::testing::detail::clear_test_world();
  try {
    world.world_group->destroy();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[harness rank %d] destroy failed: %s\n", rank, e.what());
  }
  return code;
}
