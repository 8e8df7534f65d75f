// Shared set-up of the coordinator tests.
//
// GroupCoordinator builds its groups from the process-wide world (world.h), which the harness
// does not create: a gtest Environment calls init_world (a second env:// rendezvous under mpirun,
// next to the harness's own) before the first test, builds a few coordinators every test shares,
// and tears everything down after the last test.
//
// Layouts (world ranks), for world sizes 1, 2 and 4:
//   world     [[0 .. W-1]]
//   reversed  [[W-1 .. 0]]            group rank != world rank: catches mix-ups
//   pairs     [[0, 1], [2, 3]]        PP-like: rank 2k sends to 2k+1   (W = 1: [[0]])
//   columns   [[0, 2], [1, 3]]        TP-like: the all_gather_group of pairs' senders/receivers
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/group_coordinator.h"
#include "multi_process_test.h"
#include "test_support.h"

namespace groupcoord {
namespace testing {

/// The layouts above for a world of `world_size`.
std::vector<std::vector<int>> world_layout(int world_size);
std::vector<std::vector<int>> reversed_layout(int world_size);
std::vector<std::vector<int>> pairs_layout(int world_size);
std::vector<std::vector<int>> columns_layout(int world_size);

/// The list of `layout` containing world rank `rank`.
std::vector<int> group_of(const std::vector<std::vector<int>>& layout, int rank);

/// The shared coordinators (gloo backend, with a device communicator), built by the Environment.
GroupCoordinator& world_coord();
GroupCoordinator& reversed_coord();
GroupCoordinator& pairs_coord();
GroupCoordinator& columns_coord();

/// Base fixture.
class CoordinatorTest : public MultiProcessTest {
 protected:
  int local_rank() const;
};

}  // namespace testing
}  // namespace groupcoord
