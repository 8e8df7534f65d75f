#include "coord_env.h"

#include <chrono>
#include <cstdlib>
#include <numeric>
#include <stdexcept>

#include "groupcoord/world.h"

namespace groupcoord {
namespace testing {

namespace {

struct SharedCoordinators {
  std::unique_ptr<GroupCoordinator> world, reversed, pairs, columns;
};

SharedCoordinators& shared() {
  static SharedCoordinators coordinators;
  return coordinators;
}

GroupCoordinator& require(const std::unique_ptr<GroupCoordinator>& c, const char* name) {
  if (!c) throw std::logic_error(std::string("coordinator test environment: no ") + name);
  return *c;
}

std::unique_ptr<GroupCoordinator> make(std::vector<std::vector<int>> layout, const char* name) {
  return std::make_unique<GroupCoordinator>(std::move(layout), world_info().local_rank, "gloo",
                                            /*use_device_communicator=*/true, false, name);
}

// Creates the world (a second rendezvous next to the harness's) and the shared coordinators.
class CoordinatorEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    try {
      WorldOptions options;
      const char* timeout = std::getenv("GROUPCOORD_TEST_TIMEOUT_S");
      options.timeout = std::chrono::seconds(timeout ? std::atoi(timeout) : 60);
      if (!world_is_initialized()) init_world(options);
      const int w = world_info().world_size;
      SharedCoordinators& s = shared();
      s.world = make(world_layout(w), "world_t");
      s.reversed = make(reversed_layout(w), "reversed");
      s.pairs = make(pairs_layout(w), "pp");
      s.columns = make(columns_layout(w), "tp");
    } catch (const std::exception& e) {
      FAIL() << "could not set up the coordinator tests: " << e.what();
    }
  }

  void TearDown() override {
    SharedCoordinators& s = shared();
    s = SharedCoordinators{};
    try {
      // The store lives in rank 0: nobody leaves before everyone is done with it.
      world_group()->barrier();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "final world barrier: " << e.what();
    }
    destroy_world();
  }
};

const bool registered = [] {
  ::testing::AddGlobalTestEnvironment(new CoordinatorEnvironment);
  return true;
}();

}  // namespace

std::vector<std::vector<int>> world_layout(int world_size) {
  std::vector<int> all(world_size);
  std::iota(all.begin(), all.end(), 0);
  return {all};
}

std::vector<std::vector<int>> reversed_layout(int world_size) {
  std::vector<int> all(world_size);
  for (int r = 0; r < world_size; ++r) all[r] = world_size - 1 - r;
  return {all};
}

std::vector<std::vector<int>> pairs_layout(int world_size) {
  if (world_size == 1) return {{0}};
  std::vector<std::vector<int>> layout;
  for (int r = 0; r + 1 < world_size; r += 2) layout.push_back({r, r + 1});
  return layout;
}

std::vector<std::vector<int>> columns_layout(int world_size) {
  if (world_size == 1) return {{0}};
  std::vector<std::vector<int>> layout(2);
  for (int r = 0; r < world_size; ++r) layout[r % 2].push_back(r);
  return layout;
}

std::vector<int> group_of(const std::vector<std::vector<int>>& layout, int rank) {
  for (const auto& ranks : layout) {
    for (int r : ranks) {
      if (r == rank) return ranks;
    }
  }
  return {};
}

GroupCoordinator& world_coord() { return require(shared().world, "world coordinator"); }
GroupCoordinator& reversed_coord() { return require(shared().reversed, "reversed coordinator"); }
GroupCoordinator& pairs_coord() { return require(shared().pairs, "pairs coordinator"); }
GroupCoordinator& columns_coord() { return require(shared().columns, "columns coordinator"); }

int CoordinatorTest::local_rank() const { return world_info().local_rank; }

}  // namespace testing
}  // namespace groupcoord
