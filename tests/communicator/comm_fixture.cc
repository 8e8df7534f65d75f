#include "comm_fixture.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

#include "communicator/cpu_communicator.h"

namespace groupcoord {
namespace testing {

namespace {

CommGroups& groups_slot() {
  static CommGroups groups;
  return groups;
}

// Builds the shared groups after the harness has set up the world, and drops them before the
// harness destroys it. Both steps run on every rank, in the same order.
class CommGroupsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const auto& world = test_world().world_group;
    std::vector<int> reversed(world->size());
    std::iota(reversed.rbegin(), reversed.rend(), 0);
    ProcessGroupOptions options;
    options.timeout = world->timeout();
    options.name = "commtest-cpu";
    groups_slot().cpu_group = world->new_group(reversed, options);
    options.name = "commtest-device";
    groups_slot().device_group = world->new_group(reversed, options);
  }
  void TearDown() override {
    for (auto* group : {&groups_slot().cpu_group, &groups_slot().device_group}) {
      if (*group) (*group)->destroy();
      group->reset();
    }
  }
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new CommGroupsEnvironment);

}  // namespace

const CommGroups& comm_groups() { return groups_slot(); }

void ensure_cpu_registered() {
  // The coordinator layer's register_builtin_device_communicators() registers "cpu" in the full
  // library; registering the same factory here keeps this layer testable on its own.
  if (!has_device_communicator("cpu")) register_device_communicator("cpu", make_cpu_communicator);
}

void CommunicatorTest::SetUp() {
  MultiProcessTest::SetUp();
  ASSERT_NE(comm_groups().device_group, nullptr);
  ensure_cpu_registered();
  comm_ = create_device_communicator("cpu", context());
  ASSERT_EQ(comm_->rank_in_group(), world_size() - 1 - rank());
  ASSERT_EQ(comm_->world_size(), world_size());
}

void CommunicatorTest::TearDown() {
  if (comm_) comm_->destroy();
  comm_.reset();
  MultiProcessTest::TearDown();
}

DeviceCommunicatorContext CommunicatorTest::context(bool use_all2all) const {
  DeviceCommunicatorContext context;
  context.cpu_group = comm_groups().cpu_group;
  context.device_group = comm_groups().device_group;
  context.unique_name = kGroupName;
  context.use_all2all = use_all2all;
  return context;
}

}  // namespace testing
}  // namespace groupcoord
