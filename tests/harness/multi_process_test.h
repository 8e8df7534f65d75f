// Fixture for multi-process gtests (run under `mpirun -np N`, see mpi_test_main.cc).
//
//   class AllReduceTest : public groupcoord::testing::MultiProcessTest {};
//   TEST_F(AllReduceTest, Sums) { ... world()->all_reduce(...); ... }
//
// Every rank runs every test. When a test fails on any rank, TearDown makes it fail on every rank,
// naming the ranks that failed, so rank 0's summary (the one printed) is the job's verdict.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "groupcoord/process_group.h"
#include "groupcoord/rendezvous.h"
#include "groupcoord/store.h"

namespace groupcoord {
namespace testing {

/// What the harness set up before the tests ran.
struct TestWorld {
  RendezvousResult rendezvous;
  std::shared_ptr<ProcessGroup> world_group;
};

/// The process-wide test world (valid inside tests run by groupcoord_mpi_test_main).
const TestWorld& test_world();

/// Base fixture: access to the world and cross-rank failure aggregation.
class MultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  int rank() const { return test_world().rendezvous.rank; }
  int world_size() const { return test_world().rendezvous.world_size; }
  /// A store namespace private to the current test (same prefix on every rank).
  std::shared_ptr<Store> store() const { return test_store_; }
  /// The world store itself (shared by all tests of the run).
  std::shared_ptr<Store> world_store() const { return test_world().rendezvous.store; }
  /// The world process group.
  std::shared_ptr<ProcessGroup> world() const { return test_world().world_group; }

 private:
  std::shared_ptr<Store> test_store_;
  long sequence_ = 0;
};

namespace detail {
/// Installs the world (called once by the harness main).
void set_test_world(TestWorld world);
/// Drops the world (called once by the harness main before exit).
void clear_test_world();
}  // namespace detail

}  // namespace testing
}  // namespace groupcoord
