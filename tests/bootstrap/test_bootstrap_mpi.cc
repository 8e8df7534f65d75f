// The rendezvous as real launchers run it: this binary runs under `mpirun -np N` with nothing
// else set (the harness's main already performed the rendezvous through env://).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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
  // One counter that every rank adds 1 to. A shared store hands each rank a different value of
  // 1..n and, once every rank has added, holds n; a rank-local counter would give 1 everywhere.
  const std::int64_t mine = store()->add("counter", 1);
  store()->set("counted/" + std::to_string(rank()), std::to_string(mine));
  world()->barrier();
  EXPECT_EQ(store()->add("counter", 0), world_size());
  std::vector<std::int64_t> handed_out, expected;
  for (int r = 0; r < world_size(); ++r) {
    handed_out.push_back(std::stoll(store()->get("counted/" + std::to_string(r))));
    expected.push_back(r + 1);
  }
  std::sort(handed_out.begin(), handed_out.end());
  EXPECT_EQ(handed_out, expected) << "each rank's add must return a different count";
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
