// parallel_state across processes (mpirun -np 1, 2, 4): init_distributed_environment,
// initialize_model_parallel (TP=2 x PP=2 at 4 ranks, TP=world at other sizes), the getters, each
// group's collectives, ensure_model_parallel_initialized, the error paths, destroy and re-init,
// and the same-node probes.
//
// The harness's own world is separate: each test builds the process-wide parallel_state world on
// a fresh tcp://127.0.0.1:<port> (rank 0 picks a free port and shares it through the harness
// store), and tears it down in TearDown. Expected group memberships are written as arithmetic on
// the rank (the layout is rank = pp_index * TP + tp_index), not taken from
// compute_model_parallel_layout.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "groupcoord/group_coordinator.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/world.h"
#include "multi_process_test.h"

namespace groupcoord {
namespace {

using Groups = std::vector<std::vector<int>>;

constexpr auto kTimeout = std::chrono::seconds(30);

// A TCP port that was free a moment ago (bound to port 0, read back, released).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw std::runtime_error("bind/getsockname failed");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

// Expected groups for TP x PP over `world` ranks with DP = PCP = DCP = 1 (rank = pp * TP + tp).
struct Expected {
  int tp_size, pp_size, rank;
  std::vector<int> tp() const {
    std::vector<int> ranks;
    for (int i = 0; i < tp_size; ++i) ranks.push_back(rank - rank % tp_size + i);
    return ranks;
  }
  std::vector<int> pp() const {
    std::vector<int> ranks;
    for (int stage = 0; stage < pp_size; ++stage) ranks.push_back(rank % tp_size + stage * tp_size);
    return ranks;
  }
};

class ParallelStateTest : public testing::MultiProcessTest {
 protected:
  void TearDown() override {
    // Rank 0 hosts the parallel_state store: nobody tears down before everybody is done.
    world()->barrier();
    destroy_model_parallel();
    destroy_distributed_environment();
    testing::MultiProcessTest::TearDown();
  }

  // A tcp:// method every rank agrees on; `round` tells apart several worlds in one test.
  std::string fresh_init_method(int round = 0) {
    const std::string key = "init_method/" + std::to_string(round);
    if (rank() == 0) store()->set(key, "tcp://127.0.0.1:" + std::to_string(free_port()));
    return store()->get(key);
  }

  void init(int round = 0) {
    init_distributed_environment(world_size(), rank(), fresh_init_method(round), -1, "", kTimeout);
  }

  // TP=2 x PP=2 at 4 ranks, TP=world otherwise.
  int tp_size() const { return world_size() == 4 ? 2 : world_size(); }
  int pp_size() const { return world_size() == 4 ? 2 : 1; }
  Expected expected() const { return Expected{tp_size(), pp_size(), rank()}; }

  // A 1-d float tensor whose element i is rank * 1000 + i.
  Tensor ramp(int n) const {
    Tensor t = Tensor::empty({n}, DType::Float32);
    for (int i = 0; i < n; ++i) t.data_ptr<float>()[i] = static_cast<float>(rank() * 1000 + i);
    return t;
  }

  // all_reduce of ramp() over `group` must be the sum over `members` of member * 1000 + i.
  void expect_all_reduce_over(GroupCoordinator& group, const std::vector<int>& members) {
    const int n = 17;
    Tensor sum = group.all_reduce(ramp(n));
    ASSERT_EQ(sum.numel(), n) << group.unique_name();
    for (int i = 0; i < n; ++i) {
      float want = 0;
      for (int member : members) want += static_cast<float>(member * 1000 + i);
      EXPECT_EQ(sum.data_ptr<float>()[i], want) << group.unique_name() << " element " << i;
    }
  }
};

TEST_F(ParallelStateTest, GettersBeforeInitRaiseInvalidArgument) {
  EXPECT_FALSE(model_parallel_is_initialized());
  EXPECT_THROW(get_world_group(), std::invalid_argument);
  EXPECT_THROW(get_node_count(), std::invalid_argument);
  for (auto getter : {&get_tp_group, &get_pp_group, &get_dp_group, &get_ep_group, &get_dcp_group,
                      &get_pcp_group}) {
    EXPECT_THROW(getter(), std::invalid_argument);
  }
  try {
    get_tp_group();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tensor model parallel group is not initialized"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(initialize_model_parallel(1, 1), std::invalid_argument);
  EXPECT_THROW(ensure_model_parallel_initialized(1, 1), std::invalid_argument);
  EXPECT_THROW(init_distributed_environment(-1, -1, "env://", -1, "mpi"), std::invalid_argument);
}

TEST_F(ParallelStateTest, InitCreatesTheWorldGroup) {
  init();
  GroupCoordinator& world_group = get_world_group();
  std::vector<int> everyone(world_size());
  for (int r = 0; r < world_size(); ++r) everyone[r] = r;
  EXPECT_EQ(world_group.world_size(), world_size());
  EXPECT_EQ(world_group.rank(), rank());
  EXPECT_EQ(world_group.rank_in_group(), rank());
  EXPECT_EQ(world_group.ranks(), everyone);
  EXPECT_EQ(world_group.unique_name().rfind("world", 0), 0u) << world_group.unique_name();
  EXPECT_EQ(world_group.backend(), "gloo");
  EXPECT_EQ(world_group.device_communicator(), nullptr);
  EXPECT_EQ(get_node_count(), 1);
  EXPECT_FALSE(model_parallel_is_initialized());
  world_group.barrier();
}

TEST_F(ParallelStateTest, SecondInitIsANoOpAndAMismatchThrows) {
  init();
  GroupCoordinator* first = &get_world_group();
  init_distributed_environment();  // defaults describe any world: no-op
  init_distributed_environment(world_size(), rank(), "env://", -1, "gloo");
  EXPECT_EQ(&get_world_group(), first);
  EXPECT_THROW(init_distributed_environment(world_size() + 1), std::invalid_argument);
  if (world_size() > 1) {
    EXPECT_THROW(init_distributed_environment(world_size(), (rank() + 1) % world_size()),
                 std::invalid_argument);
  }
  EXPECT_THROW(init_distributed_environment(-1, -1, "env://", -1, "nccl"), std::invalid_argument);
  EXPECT_EQ(&get_world_group(), first);
}

TEST_F(ParallelStateTest, GroupsMatchTheLayout) {
  init();
  initialize_model_parallel(tp_size(), pp_size());
  ASSERT_TRUE(model_parallel_is_initialized());
  const Expected want = expected();

  GroupCoordinator& tp = get_tp_group();
  EXPECT_EQ(tp.ranks(), want.tp());
  EXPECT_EQ(tp.rank_in_group(), rank() % tp_size());
  EXPECT_EQ(tp.unique_name().rfind("tp", 0), 0u) << tp.unique_name();
  EXPECT_EQ(get_tensor_model_parallel_world_size(), tp_size());
  EXPECT_EQ(get_tensor_model_parallel_rank(), rank() % tp_size());

  GroupCoordinator& pp = get_pp_group();
  EXPECT_EQ(pp.ranks(), want.pp());
  EXPECT_EQ(pp.rank_in_group(), rank() / tp_size());
  EXPECT_EQ(pp.is_first_rank(), rank() < tp_size());
  EXPECT_EQ(pp.is_last_rank(), rank() >= world_size() - tp_size());
  EXPECT_EQ(pp.unique_name().rfind("pp", 0), 0u) << pp.unique_name();

  // DP = PCP = DCP = 1: singletons; EP spans DP x PCP x TP = the TP group.
  EXPECT_EQ(get_dp_group().ranks(), std::vector<int>{rank()});
  EXPECT_EQ(get_pcp_group().ranks(), std::vector<int>{rank()});
  EXPECT_EQ(get_dcp_group().ranks(), std::vector<int>{rank()});
  EXPECT_EQ(get_decode_context_model_parallel_world_size(), 1);
  EXPECT_EQ(get_decode_context_model_parallel_rank(), 0);
  EXPECT_EQ(get_ep_group().ranks(), want.tp());
  EXPECT_EQ(get_dp_group().unique_name().rfind("dp", 0), 0u);
  EXPECT_EQ(get_ep_group().unique_name().rfind("ep", 0), 0u);
  EXPECT_EQ(get_dcp_group().unique_name().rfind("dcp", 0), 0u);
  EXPECT_EQ(get_pcp_group().unique_name().rfind("pcp", 0), 0u);

  if (world_size() == 4) {
    EXPECT_EQ(tp.group_ranks(), (Groups{{0, 1}, {2, 3}}));
    EXPECT_EQ(pp.group_ranks(), (Groups{{0, 2}, {1, 3}}));
    EXPECT_EQ(get_dp_group().group_ranks(), (Groups{{0}, {2}, {1}, {3}}));
    EXPECT_EQ(get_ep_group().group_ranks(), (Groups{{0, 1}, {2, 3}}));
  }
}

TEST_F(ParallelStateTest, EveryGroupsCollectivesWork) {
  init();
  initialize_model_parallel(tp_size(), pp_size());
  const Expected want = expected();
  expect_all_reduce_over(get_tp_group(), want.tp());  // membership check by sum
  expect_all_reduce_over(get_pp_group(), want.pp());
  expect_all_reduce_over(get_ep_group(), want.tp());
  expect_all_reduce_over(get_dp_group(), {rank()});
  expect_all_reduce_over(get_dcp_group(), {rank()});
  expect_all_reduce_over(get_pcp_group(), {rank()});

  // all_gather over TP: member k's ramp in block k.
  Tensor gathered = get_tp_group().all_gather(ramp(3), -1);
  ASSERT_EQ(gathered.numel(), 3 * tp_size());
  for (int k = 0; k < tp_size(); ++k) {
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(gathered.data_ptr<float>()[k * 3 + i], want.tp()[k] * 1000 + i);
    }
  }

  // broadcast_object over PP from stage 0, and the world from rank 0.
  GroupCoordinator& pp = get_pp_group();
  std::optional<Bytes> mine;
  if (pp.is_first_rank()) mine = "stage0 of column " + std::to_string(rank() % tp_size());
  EXPECT_EQ(pp.broadcast_object(mine, 0), "stage0 of column " + std::to_string(rank() % tp_size()));
  std::optional<Bytes> hello;
  if (rank() == 0) hello = Bytes("hello\0world", 11);
  EXPECT_EQ(get_world_group().broadcast_object(hello, 0), Bytes("hello\0world", 11));

  // A tensor dict down the pipeline.
  if (pp.world_size() > 1) {
    if (pp.is_first_rank()) {
      pp.send_tensor_dict({{"x", ramp(5)}, {"tag", Bytes("step7")}});
    } else if (pp.rank_in_group() == 1) {
      std::optional<TensorDict> got = pp.recv_tensor_dict();
      ASSERT_TRUE(got.has_value());
      std::optional<Tensor> x = find_tensor(*got, "x");
      ASSERT_TRUE(x.has_value());
      ASSERT_EQ(x->numel(), 5);
      const int sender = want.pp()[0];
      for (int i = 0; i < 5; ++i) EXPECT_EQ(x->data_ptr<float>()[i], sender * 1000 + i);
      const TensorDictValue* tag = find_value(*got, "tag");
      ASSERT_NE(tag, nullptr);
      EXPECT_EQ(std::get<Bytes>(*tag), "step7");
    }
  }
  get_world_group().barrier();
}

TEST_F(ParallelStateTest, EnsureModelParallelInitialized) {
  init();
  ensure_model_parallel_initialized(tp_size(), pp_size());  // initializes
  ASSERT_TRUE(model_parallel_is_initialized());
  GroupCoordinator* tp = &get_tp_group();
  ensure_model_parallel_initialized(tp_size(), pp_size());  // already: no-op
  EXPECT_EQ(&get_tp_group(), tp);
  EXPECT_THROW(ensure_model_parallel_initialized(tp_size() * 2, pp_size()), std::invalid_argument);
  EXPECT_THROW(ensure_model_parallel_initialized(tp_size(), pp_size() + 1), std::invalid_argument);
  EXPECT_THROW(ensure_model_parallel_initialized(tp_size(), pp_size(), 2), std::invalid_argument);
  EXPECT_THROW(ensure_model_parallel_initialized(tp_size(), pp_size(), 1, 2),
               std::invalid_argument);
  expect_all_reduce_over(get_tp_group(), expected().tp());
}

TEST_F(ParallelStateTest, DoubleInitializationRaises) {
  init();
  initialize_model_parallel(tp_size(), pp_size());
  try {
    initialize_model_parallel(tp_size(), pp_size());
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("already initialized"), std::string::npos) << e.what();
  }
  // The groups survived the refused call.
  expect_all_reduce_over(get_tp_group(), expected().tp());
}

TEST_F(ParallelStateTest, BadSizesRaiseBeforeAnyGroupIsCreated) {
  init();
  EXPECT_THROW(initialize_model_parallel(world_size() + 1), std::invalid_argument);
  EXPECT_THROW(initialize_model_parallel(1, 1, 1, 1, world_size() + 1), std::invalid_argument);
  EXPECT_THROW(initialize_model_parallel(0), std::invalid_argument);
  EXPECT_THROW(initialize_model_parallel(1, 1, 1, 2), std::invalid_argument);  // DCP > TP
  EXPECT_THROW(initialize_model_parallel(1, 1, 1, 1, 1, "mpi"), std::invalid_argument);
  EXPECT_FALSE(model_parallel_is_initialized());
  // Every rank refused locally, so the world is still in step.
  initialize_model_parallel(tp_size(), pp_size());
  expect_all_reduce_over(get_tp_group(), expected().tp());
}

TEST_F(ParallelStateTest, DestroyThenReinitialize) {
  init(0);
  initialize_model_parallel(tp_size(), pp_size());
  expect_all_reduce_over(get_tp_group(), expected().tp());
  get_world_group().barrier();
  destroy_model_parallel();
  EXPECT_FALSE(model_parallel_is_initialized());
  EXPECT_THROW(get_tp_group(), std::invalid_argument);
  destroy_model_parallel();  // idempotent

  // New sizes on the same world: the whole world is one pipeline.
  initialize_model_parallel(1, world_size());
  std::vector<int> everyone(world_size());
  for (int r = 0; r < world_size(); ++r) everyone[r] = r;
  EXPECT_EQ(get_pp_group().ranks(), everyone);
  expect_all_reduce_over(get_pp_group(), everyone);
  expect_all_reduce_over(get_tp_group(), {rank()});

  // The whole environment, then a fresh world on a new store.
  get_world_group().barrier();
  destroy_distributed_environment();
  EXPECT_FALSE(model_parallel_is_initialized());
  EXPECT_THROW(get_world_group(), std::invalid_argument);
  EXPECT_FALSE(world_is_initialized());
  world()->barrier();  // rank 0's old store is gone; meet on the harness world instead
  init(1);
  initialize_model_parallel(tp_size(), pp_size());
  EXPECT_EQ(get_tp_group().ranks(), expected().tp());
  expect_all_reduce_over(get_tp_group(), expected().tp());
}

TEST_F(ParallelStateTest, SameNodeProbes) {
  init();
  initialize_model_parallel(tp_size(), pp_size());
  ProcessGroup& world_cpu = *get_world_group().cpu_group();
  EXPECT_EQ(in_the_same_node_as(world_cpu, 0), std::vector<bool>(world_size(), true));
  EXPECT_EQ(in_the_same_node_as(world_cpu, world_size() - 1),
            std::vector<bool>(world_size(), true));
  EXPECT_EQ(get_node_count(world_cpu), 1);
  ProcessGroup& tp_cpu = *get_tp_group().cpu_group();
  EXPECT_EQ(in_the_same_node_as(tp_cpu), std::vector<bool>(tp_size(), true));
  EXPECT_THROW(in_the_same_node_as(tp_cpu, tp_size()), std::invalid_argument);
  EXPECT_EQ(get_node_count(tp_cpu), 1);
  EXPECT_EQ(get_node_count(), 1);
}

}  // namespace
}  // namespace groupcoord
