#include <gtest/gtest.h>

#include <stdexcept>

#include "fake_env.h"
#include "groupcoord/launcher_env.h"

namespace groupcoord {
namespace {

using testing::fake_env;

TEST(LauncherEnv, NothingSetMeansNoLauncher) {
  LauncherEnv env = detect_launcher(fake_env({}));
  EXPECT_EQ(env.launcher, "none");
  EXPECT_FALSE(env.detected());
  EXPECT_EQ(env.rank, -1);
  EXPECT_EQ(env.world_size, -1);
  EXPECT_FALSE(env.single_node());
}

TEST(LauncherEnv, Torchrun) {
  LauncherEnv env = detect_launcher(fake_env({{"RANK", "3"},
                                              {"WORLD_SIZE", "8"},
                                              {"LOCAL_RANK", "1"},
                                              {"LOCAL_WORLD_SIZE", "2"},
                                              {"MASTER_ADDR", "node0"},
                                              {"MASTER_PORT", "29500"}}));
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_FALSE(env.single_node());
}

TEST(LauncherEnv, OpenMpiSingleNode) {
  LauncherEnv env = detect_launcher(fake_env({{"OMPI_COMM_WORLD_RANK", "2"},
                                              {"OMPI_COMM_WORLD_SIZE", "4"},
                                              {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                              {"PMIX_NAMESPACE", "12345@1"}}));
  EXPECT_EQ(env.launcher, "openmpi");
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.job_id, "12345@1");
  EXPECT_TRUE(env.single_node());
}

TEST(LauncherEnv, Mpich) {
  LauncherEnv env = detect_launcher(fake_env({{"PMI_RANK", "1"},
                                              {"PMI_SIZE", "2"},
                                              {"MPI_LOCALRANKID", "1"},
                                              {"MPI_LOCALNRANKS", "2"},
                                              {"PMI_KVSNAME", "kvs_77_0"}}));
  EXPECT_EQ(env.launcher, "mpich");
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_TRUE(env.single_node());
}

TEST(LauncherEnv, SlurmOneNodeAndTwoNodes) {
  LauncherEnv one = detect_launcher(fake_env({{"SLURM_PROCID", "0"},
                                              {"SLURM_NTASKS", "4"},
                                              {"SLURM_LOCALID", "0"},
                                              {"SLURM_NNODES", "1"},
                                              {"SLURM_JOB_ID", "991"},
                                              {"SLURM_STEP_ID", "3"}}));
  EXPECT_EQ(one.launcher, "slurm");
  EXPECT_EQ(one.world_size, 4);
  EXPECT_EQ(one.job_id, "991.3");
  EXPECT_TRUE(one.single_node());

  LauncherEnv two = detect_launcher(fake_env({{"SLURM_PROCID", "5"},
                                              {"SLURM_NTASKS", "8"},
                                              {"SLURM_LOCALID", "1"},
                                              {"SLURM_NNODES", "2"}}));
  EXPECT_EQ(two.rank, 5);
  EXPECT_FALSE(two.single_node());
}

TEST(LauncherEnv, TorchrunWinsOverOpenMpi) {
  LauncherEnv env = detect_launcher(fake_env({{"RANK", "1"},
                                              {"WORLD_SIZE", "2"},
                                              {"OMPI_COMM_WORLD_RANK", "0"},
                                              {"OMPI_COMM_WORLD_SIZE", "4"}}));
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.world_size, 2);
}

TEST(LauncherEnv, MalformedNumbersNameTheVariable) {
  try {
    detect_launcher(fake_env({{"RANK", "one"}, {"WORLD_SIZE", "2"}}));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("one"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      detect_launcher(fake_env({{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}})),
      std::invalid_argument);
  EXPECT_THROW(detect_launcher(fake_env({{"MASTER_PORT", "29500x"}})), std::invalid_argument);
}

TEST(LauncherEnv, HalfSetVariablesNameTheMissingOne) {
  // torch raises "WORLD_SIZE expected, but not set"; silently becoming rank 0 of 1 would not.
  const std::pair<const char*, const char*> pairs[] = {
      {"RANK", "WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"}};
  for (const auto& [rank, size] : pairs) {
    for (const char* set : {rank, size}) {
      const std::string missing = set == rank ? size : rank;
      try {
        detect_launcher(fake_env({{set, "1"}}));
        ADD_FAILURE() << set << " alone was accepted";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(missing + " is not"), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace groupcoord
