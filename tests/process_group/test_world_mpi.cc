// The process-wide world (world.h): init_world performs its own env:// rendezvous under mpirun,
// next to the harness's world, and builds the world group that coordinators derive from.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "groupcoord/launcher_env.h"
#include "groupcoord/world.h"
#include "multi_process_test.h"

namespace groupcoord {
namespace {

class WorldTest : public testing::MultiProcessTest {};

TEST_F(WorldTest, AccessorsBeforeInitNameTheProblem) {
  ASSERT_FALSE(world_is_initialized());
  try {
    world_group();
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not initialized"), std::string::npos) << e.what();
  }
  EXPECT_THROW(world_info(), std::invalid_argument);
  EXPECT_THROW(::groupcoord::world_store(), std::invalid_argument);  // not the fixture's
  destroy_world();  // idempotent when there is nothing to destroy
}

TEST_F(WorldTest, InitUseDestroyAndInitAgain) {
  for (int round = 0; round < 2; ++round) {
    WorldOptions options;
    options.timeout = std::chrono::seconds(60);
    init_world(options);
    ASSERT_TRUE(world_is_initialized());
    EXPECT_EQ(world_info().rank, rank());
    EXPECT_EQ(world_info().world_size, world_size());
    EXPECT_EQ(world_timeout(), std::chrono::milliseconds(std::chrono::seconds(60)));

    // The world group reaches every rank: the sum of ranks is n(n-1)/2.
    std::int64_t value = world_info().rank + round;
    world_group()->all_reduce(&value, 1, DType::Int64);
    const std::int64_t n = world_size();
    EXPECT_EQ(value, n * (n - 1) / 2 + n * round);

    // Initialising twice is an error that names the existing world.
    EXPECT_THROW(init_world(options), std::invalid_argument);

    world_group()->barrier();  // rank 0 hosts this world's store: leave together
    destroy_world();
    EXPECT_FALSE(world_is_initialized());
  }
}

}  // namespace
}  // namespace groupcoord
