// The rendezvous as real launchers run it: this binary runs under `mpirun -np N` with nothing
// else set (the harness's main already performed the rendezvous through env://).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "groupcoord/launcher_env.h"
#include "multi_process_test.h"

namespace groupcoord {
namespace {

class BootstrapMpiTest : public testing::MultiProcessTest {};

TEST_F(BootstrapMpiTest, RankAndSizeComeFromTheLauncher) {
  LauncherEnv launcher = detect_launcher();
  ASSERT_TRUE(launcher.detected()) << "run this test under mpirun";
  EXPECT_EQ(rank(), launcher.rank);
  EXPECT_EQ(world_size(), launcher.world_size);
  EXPECT_EQ(testing::test_world().rendezvous.local_rank, launcher.local_rank);
  EXPECT_TRUE(testing::test_world().rendezvous.single_node);
}

TEST_F(BootstrapMpiTest, WorldStoreIsShared) {
  store()->set("rank/" + std::to_string(rank()), std::to_string(rank() * rank()));
  for (int r = 0; r < world_size(); ++r) {
    EXPECT_EQ(store()->get("rank/" + std::to_string(r)), std::to_string(r * r));
  }
  EXPECT_LE(store()->add("counter", 1), world_size());
}

TEST_F(BootstrapMpiTest, SingleNodeRendezvousDirectoryIsRemoved) {
  const std::string& description = testing::test_world().rendezvous.description;
  if (world_size() == 1) GTEST_SKIP() << "world size 1 needs no rendezvous directory";
  const std::string marker = "single-node rendezvous via ";
  ASSERT_EQ(description.rfind(marker, 0), 0u) << description;
  const std::string dir = description.substr(marker.size());
  // Rank 0 removes it once every rank has connected, which the harness's setup waited for.
  world()->barrier();
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

}  // namespace
}  // namespace groupcoord
