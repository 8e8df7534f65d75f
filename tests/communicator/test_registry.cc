// The device communicator registry: lookup by name, sorted listing, unknown names, replacement,
// and an engine's own factory being the one used.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "comm_fixture.h"
#include "communicator/cpu_communicator.h"

namespace groupcoord {
namespace testing {
namespace {

class RegistryTest : public CommunicatorTest {};

TEST_F(RegistryTest, UnknownNameListsRegisteredOnes) {
  ensure_cpu_registered();
  EXPECT_TRUE(has_device_communicator("cpu"));
  EXPECT_FALSE(has_device_communicator("no-such-backend"));
  expect_invalid_argument([&] { create_device_communicator("no-such-backend", context()); },
                          {kGroupName, "no-such-backend", "cpu"});
}

TEST_F(RegistryTest, EngineFactoryIsUsedAndCanBeReplaced) {
  static std::atomic<int> first_calls{0};
  static std::atomic<int> second_calls{0};
  static std::string seen_name;
  register_device_communicator("engine-custom", [](const DeviceCommunicatorContext& c) {
    ++first_calls;
    seen_name = c.unique_name;
    return make_cpu_communicator(c);
  });
  const std::vector<std::string> names = registered_device_communicators();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "engine-custom"), names.end());

  auto communicator = create_device_communicator("engine-custom", context());
  EXPECT_EQ(first_calls.load(), 1);
  EXPECT_EQ(seen_name, kGroupName);
  EXPECT_EQ(communicator->backend_name(), "cpu");

  register_device_communicator("engine-custom", [](const DeviceCommunicatorContext& c) {
    ++second_calls;
    return make_cpu_communicator(c);
  });
  create_device_communicator("engine-custom", context());
  EXPECT_EQ(first_calls.load(), 1);
  EXPECT_EQ(second_calls.load(), 1);
}

TEST_F(RegistryTest, BadRegistrations) {
  expect_invalid_argument([] { register_device_communicator("", make_cpu_communicator); },
                          {"register_device_communicator", "name"});
  expect_invalid_argument([] { register_device_communicator("empty-factory", {}); },
                          {"register_device_communicator", "empty-factory"});
  register_device_communicator("returns-null", [](const DeviceCommunicatorContext&) {
    return std::unique_ptr<DeviceCommunicator>();
  });
  expect_invalid_argument([&] { create_device_communicator("returns-null", context()); },
                          {kGroupName, "returns-null"});
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
