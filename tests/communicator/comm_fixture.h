// Fixture of the communicator tests: a "cpu" communicator built through the registry over a
// device group made with world()->new_group(...), whose rank order is the reverse of the world's
// (so group ranks differ from world ranks and the tests catch a mix-up).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/device_communicator.h"
#include "multi_process_test.h"
#include "test_support.h"

namespace groupcoord {
namespace testing {

/// Name the communicators of these tests carry (DeviceCommunicatorContext::unique_name).
inline const char* kGroupName = "commtest:0";

/// The CPU and device groups shared by every test (created once, collectively, by a gtest
/// Environment before the first test and destroyed after the last).
struct CommGroups {
  std::shared_ptr<ProcessGroup> cpu_group;
  std::shared_ptr<ProcessGroup> device_group;
};
const CommGroups& comm_groups();

/// Registers "cpu" with make_cpu_communicator unless something registered it already.
void ensure_cpu_registered();

/// Base fixture: comm() is a fresh "cpu" communicator over the shared groups.
class CommunicatorTest : public MultiProcessTest {
 protected:
  void SetUp() override;
  void TearDown() override;

  /// A context over the shared groups (use_all2all as given).
  DeviceCommunicatorContext context(bool use_all2all = false) const;
  DeviceCommunicator& comm() { return *comm_; }
  /// Rank in the communicator's group (not the world rank).
  int group_rank() const { return comm_->rank_in_group(); }
  int group_size() const { return comm_->world_size(); }

 private:
  std::unique_ptr<DeviceCommunicator> comm_;
};

}  // namespace testing
}  // namespace groupcoord
