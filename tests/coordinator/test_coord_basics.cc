// GroupCoordinator construction, rank bookkeeping, names, the registry, destroy, and the world
// size 1 bypasses.
#include <gtest/gtest.h>

#include <numeric>

#include "coord_env.h"
#include "coord_tensors.h"
#include "groupcoord/errors.h"
#include "groupcoord/world.h"

namespace groupcoord {
namespace testing {
namespace {

class CoordinatorBasics : public CoordinatorTest {};

// Every rank property against the layout, for each shared coordinator.
void check_ranks(const GroupCoordinator& c, const std::vector<std::vector<int>>& layout, int rank) {
  const std::vector<int> mine = group_of(layout, rank);
  const int n = static_cast<int>(mine.size());
  const int me = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  SCOPED_TRACE(c.unique_name());
  EXPECT_EQ(c.rank(), rank);
  EXPECT_EQ(c.ranks(), mine);
  EXPECT_EQ(c.world_size(), n);
  EXPECT_EQ(c.rank_in_group(), me);
  EXPECT_EQ(c.group_ranks(), layout);
  EXPECT_EQ(c.first_rank(), mine.front());
  EXPECT_EQ(c.last_rank(), mine.back());
  EXPECT_EQ(c.is_first_rank(), me == 0);
  EXPECT_EQ(c.is_last_rank(), me == n - 1);
  EXPECT_EQ(c.next_rank(), mine[(me + 1) % n]);
  EXPECT_EQ(c.prev_rank(), mine[(me + n - 1) % n]);
  EXPECT_EQ(c.backend(), "gloo");
  EXPECT_TRUE(c.device().is_cpu());
  ASSERT_NE(c.cpu_group(), nullptr);
  ASSERT_NE(c.device_group(), nullptr);
  EXPECT_EQ(c.cpu_group()->world_ranks(), mine);
  EXPECT_EQ(c.device_group()->world_ranks(), mine);
  // vLLM creates the communicator only for groups of more than one rank.
  EXPECT_EQ(c.device_communicator() != nullptr, n > 1);
  EXPECT_EQ(GroupCoordinator::find(c.unique_name()), &c);
}

TEST_F(CoordinatorBasics, RankProperties) {
  const int w = world_size();
  check_ranks(world_coord(), world_layout(w), rank());
  check_ranks(reversed_coord(), reversed_layout(w), rank());
  check_ranks(pairs_coord(), pairs_layout(w), rank());
  check_ranks(columns_coord(), columns_layout(w), rank());
  EXPECT_EQ(world_coord().local_rank(), world_info().local_rank);
}

TEST_F(CoordinatorBasics, UniqueNamesCountPerNameAndFindTracksLiveGroups) {
  auto a = std::make_unique<GroupCoordinator>(world_layout(world_size()), local_rank(), "gloo",
                                              false, false, "names_test");
  auto b = std::make_unique<GroupCoordinator>(world_layout(world_size()), local_rank(), "", false,
                                              false, "names_test");
  auto other = std::make_unique<GroupCoordinator>(world_layout(world_size()), local_rank(), "gloo",
                                                  false, false, "names_other");
  auto anon =
      std::make_unique<GroupCoordinator>(world_layout(world_size()), local_rank(), "gloo", false);
  EXPECT_EQ(a->unique_name(), "names_test:0");
  EXPECT_EQ(b->unique_name(), "names_test:1");
  EXPECT_EQ(b->backend(), "gloo");  // "" picks gloo without a CUDA communicator
  EXPECT_EQ(other->unique_name(), "names_other:0");
  EXPECT_EQ(anon->unique_name().rfind("anonymous:", 0), 0u) << anon->unique_name();
  EXPECT_EQ(GroupCoordinator::find("names_test:0"), a.get());
  EXPECT_EQ(GroupCoordinator::find("names_test:1"), b.get());
  EXPECT_EQ(GroupCoordinator::find("names_test:7"), nullptr);
  EXPECT_EQ(GroupCoordinator::find("names_test"), nullptr);
  EXPECT_EQ(a->device_communicator(), nullptr);  // use_device_communicator = false

  // The registry's generation moves with every coordinator that leaves it, and only then.
  const std::uint64_t before = GroupCoordinator::registry_generation();
  a->destroy();
  EXPECT_EQ(GroupCoordinator::find("names_test:0"), nullptr);
  const std::uint64_t after_a = GroupCoordinator::registry_generation();
  EXPECT_NE(after_a, before) << "a destroyed coordinator must change the generation";
  a->destroy();  // idempotent
  EXPECT_EQ(GroupCoordinator::registry_generation(), after_a) << "nothing left the registry";
  b.reset();  // the destructor destroys and unregisters too
  EXPECT_EQ(GroupCoordinator::find("names_test:1"), nullptr);
  EXPECT_NE(GroupCoordinator::registry_generation(), after_a);
  // Names are never reused.
  const std::uint64_t before_c = GroupCoordinator::registry_generation();
  auto c = std::make_unique<GroupCoordinator>(world_layout(world_size()), local_rank(), "gloo",
                                              false, false, "names_test");
  EXPECT_EQ(c->unique_name(), "names_test:2");
  EXPECT_EQ(GroupCoordinator::registry_generation(), before_c) << "a new one changes nothing";
}

TEST_F(CoordinatorBasics, DestroyedCoordinatorRaisesDistributedError) {
  GroupCoordinator c(world_layout(world_size()), local_rank(), "gloo", true, false, "destroyed");
  c.barrier();
  c.destroy();
  c.destroy();
  Tensor t = make_tensor({4}, DType::Float32, [](std::int64_t i) { return double(i); });
  expect_error<DistributedError>([&] { c.all_reduce(t); }, {"destroyed:0", "all_reduce"});
  expect_error<DistributedError>([&] { c.barrier(); }, {"destroyed:0", "barrier"});
  expect_error<DistributedError>([&] { c.broadcast_object(Bytes("x")); },
                                 {"destroyed:0", "broadcast_object"});
  // Accessors still answer.
  EXPECT_EQ(c.world_size(), world_size());
  EXPECT_EQ(c.unique_name(), "destroyed:0");
}

TEST_F(CoordinatorBasics, ConstructorRejectsBadArgumentsOnEveryRank) {
  const int w = world_size();
  expect_invalid_argument(
      [&] {
        GroupCoordinator c({{0, w}}, local_rank(), "gloo", true, false, "bad_ranks");
      },
      {"bad_ranks:0", "rank " + std::to_string(w), "out of range"});
  expect_invalid_argument(
      [&] {
        GroupCoordinator c({{0}, {0}}, local_rank(), "gloo", true, false, "dup_ranks");
      },
      {"dup_ranks:0", "rank 0", "more than once"});
  expect_invalid_argument(
      [&] {
        GroupCoordinator c({{0}, {}}, local_rank(), "gloo", true, false, "empty_group");
      },
      {"empty_group:0", "empty group"});
  expect_invalid_argument(
      [&] { GroupCoordinator c(world_layout(w), local_rank(), "mpi", true, false, "bad_backend"); },
      {"bad_backend:0", "unknown backend", "mpi"});
  if (default_backend() != "nccl") {  // a GPU-less machine, or a build without CUDA
    expect_invalid_argument(
        [&] { GroupCoordinator c(world_layout(w), local_rank(), "nccl", true, false, "no_cuda"); },
        {"no_cuda:0", "nccl", "CUDA", "not available"});
  }
  expect_invalid_argument(
      [&] { GroupCoordinator c(world_layout(w), -1, "gloo", true, false, "bad_local"); },
      {"bad_local:0", "local_rank -1"});
  expect_invalid_argument(
      [&] {
        GroupCoordinator c(world_layout(w), local_rank(), "gloo", true, false, "bad_timeout", false,
                           std::chrono::milliseconds(0));
      },
      {"bad_timeout:0", "timeout 0"});
  // Nothing collective started: the world is still in step.
  world_coord().barrier();
}

TEST_F(CoordinatorBasics, RankInNoGroupRaisesAfterTheCollectivePart) {
  // Group [[0]]: every rank takes part in creating it, then the others find themselves outside.
  if (rank() == 0) {
    GroupCoordinator c({{0}}, local_rank(), "gloo", true, false, "only_zero");
    EXPECT_EQ(c.world_size(), 1);
    EXPECT_EQ(c.device_communicator(), nullptr);
  } else {
    expect_invalid_argument(
        [&] { GroupCoordinator c({{0}}, local_rank(), "gloo", true, false, "only_zero"); },
        {"only_zero:0", "world rank " + std::to_string(rank()), "none of the groups"});
  }
  world_coord().barrier();
}

// Singleton groups [[0], [1], ...]: every rank is alone in its group, at any world size.
std::vector<std::vector<int>> singletons(int world_size) {
  std::vector<std::vector<int>> layout;
  for (int r = 0; r < world_size; ++r) layout.push_back({r});
  return layout;
}

TEST_F(CoordinatorBasics, WorldSizeOneBypassesAsVllm) {
  GroupCoordinator c(singletons(world_size()), local_rank(), "gloo", true, false, "single");
  ASSERT_EQ(c.world_size(), 1);
  EXPECT_EQ(c.device_communicator(), nullptr);
  const std::string name = c.unique_name();
  Tensor t = make_tensor({2, 3, 4}, DType::Float32, [](std::int64_t i) { return double(i); });
  auto same = [&](const Tensor& out) { return out.data_ptr() == t.data_ptr(); };

  EXPECT_TRUE(same(c.all_reduce(t)));
  // vLLM returns before checking dim: an invalid dim passes unnoticed at world size 1.
  EXPECT_TRUE(same(c.all_gather(t, 5)));
  EXPECT_TRUE(same(c.reduce_scatter(t, -9)));
  EXPECT_TRUE(same(*c.gather(t, 0)));
  EXPECT_TRUE(same(c.broadcast(t, 0)));
  // ... but src / dst are checked (vLLM asserts them).
  expect_invalid_argument([&] { c.gather(t, 1); }, {name, "gather", "dst 1"});
  expect_invalid_argument([&] { c.broadcast(t, 1); }, {name, "broadcast", "src 1"});
  expect_invalid_argument([&] { c.broadcast(t, -1); }, {name, "broadcast", "src -1"});

  EXPECT_EQ(c.broadcast_object(Bytes("obj")), "obj");
  expect_invalid_argument([&] { c.broadcast_object(std::nullopt); },
                          {name, "broadcast_object", "no object"});
  EXPECT_EQ(c.broadcast_object_list({"a", "b"}), (std::vector<Bytes>{"a", "b"}));
  expect_invalid_argument([&] { c.send_object("x", 0); }, {name, "send_object", "dst 0"});
  expect_invalid_argument([&] { c.recv_object(0); }, {name, "recv_object", "src 0"});

  TensorDict dict = {{"t", t}, {"b", Bytes("v")}};
  auto broadcast = c.broadcast_tensor_dict(dict);
  ASSERT_TRUE(broadcast.has_value());
  ASSERT_EQ(broadcast->size(), 2u);
  EXPECT_TRUE(same(std::get<Tensor>((*broadcast)[0].second)));
  EXPECT_FALSE(c.broadcast_tensor_dict(std::nullopt).has_value());
  auto sent = c.send_tensor_dict(dict);
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(std::get<Bytes>((*sent)[1].second), "v");
  EXPECT_TRUE(c.isend_tensor_dict(dict).empty());
  EXPECT_FALSE(c.recv_tensor_dict().has_value());
  IrecvTensorDictResult pending = c.irecv_tensor_dict();
  EXPECT_EQ(pending.tensor_dict, nullptr);
  EXPECT_TRUE(pending.handles.empty());
  EXPECT_TRUE(pending.postprocess.empty());
  expect_invalid_argument([&] { c.send_tensor_dict(dict, 3); },
                          {name, "send_tensor_dict", "dst 3"});

  // The v-variants and point-to-point tensors need a communicator, which world size 1 lacks.
  expect_invalid_argument([&] { c.all_gatherv(t); },
                          {name, "all_gatherv", "No device communicator found"});
  expect_invalid_argument([&] { c.reduce_scatterv(t); },
                          {name, "reduce_scatterv", "No device communicator found"});
  expect_invalid_argument([&] { c.send(t); }, {name, "send", "No device communicator found"});
  expect_invalid_argument([&] { c.recv({2}, DType::Float32); },
                          {name, "recv", "No device communicator found"});

  // MoE routing without a communicator returns the inputs.
  auto routed = c.dispatch_router_logits(t, t, false, {t});
  EXPECT_TRUE(same(routed.hidden_states) && same(routed.router_logits));
  ASSERT_EQ(routed.extra_tensors.size(), 1u);
  auto dispatched = c.dispatch(t, t, t);
  EXPECT_TRUE(same(dispatched.hidden_states) && same(dispatched.topk_ids));
  EXPECT_TRUE(same(c.combine(t)));
  c.barrier();
}

TEST_F(CoordinatorBasics, WithoutCommunicatorCollectivesRaiseAsVllm) {
  GroupCoordinator c(world_layout(world_size()), local_rank(), "gloo", false, false, "nocomm");
  EXPECT_EQ(c.device_communicator(), nullptr);
  Tensor t = make_tensor({4, 2}, DType::Int32, [](std::int64_t i) { return double(i); });
  if (world_size() > 1) {
    expect_invalid_argument([&] { c.all_reduce(t); },
                            {"nocomm:0", "all_reduce", "No device communicator found"});
    expect_invalid_argument([&] { c.all_gather(t, 0); },
                            {"nocomm:0", "all_gather", "No device communicator found"});
    expect_invalid_argument([&] { c.gather(t, 0, 0); },
                            {"nocomm:0", "gather", "No device communicator found"});
  }
  // The object protocols, broadcast (device group) and host tensor dicts work without one.
  Tensor b = make_tensor({3}, DType::Int64, [&](std::int64_t i) { return rank_value(rank(), i); });
  c.broadcast(b, 0);
  expect_tensor(b, {3}, DType::Int64, {rank_value(0, 0), rank_value(0, 1), rank_value(0, 2)},
                "broadcast without a communicator");
  EXPECT_EQ(c.broadcast_object(rank() == 0 ? std::optional<Bytes>("hi") : std::nullopt), "hi");
  auto d = c.broadcast_tensor_dict(rank() == 0 ? std::optional<TensorDict>(TensorDict{{"x", b}})
                                               : std::nullopt);
  ASSERT_TRUE(d.has_value());
  expect_tensor(std::get<Tensor>((*d)[0].second), {3}, DType::Int64,
                {rank_value(0, 0), rank_value(0, 1), rank_value(0, 2)}, "dict without comm");
  auto routed = c.combine(t);
  EXPECT_EQ(routed.data_ptr(), t.data_ptr());
}

TEST_F(CoordinatorBasics, SiblingDeviceGroupIsAnIndependentCommunicator) {
  GroupCoordinator& pairs = pairs_coord();
  std::shared_ptr<DeviceCommunicator> sibling = pairs.make_sibling_device_group("overlap");
  ASSERT_NE(sibling, nullptr);
  EXPECT_EQ(sibling->world_size(), pairs.world_size());
  EXPECT_EQ(sibling->rank_in_group(), pairs.rank_in_group());
  // Sum over the pair, through the sibling and through the coordinator, interleaved.
  Tensor t =
      make_tensor({5}, DType::Float32, [&](std::int64_t i) { return rank_value(rank(), i); });
  std::vector<double> expected(5, 0.0);
  for (int r : pairs.ranks()) {
    for (int i = 0; i < 5; ++i) expected[i] += rank_value(r, i);
  }
  expect_tensor(sibling->all_reduce(t), {5}, DType::Float32, expected, "sibling all_reduce");
  expect_tensor(pairs.all_reduce(t), {5}, DType::Float32, expected, "pairs all_reduce");
  sibling->destroy();
  world_coord().barrier();
}

TEST_F(CoordinatorBasics, DispatchAndCombineDelegateToTheCommunicator) {
  const int w = world_size();
  GroupCoordinator c(world_layout(w), local_rank(), "gloo", true, false, "moe",
                     /*use_all2all=*/true);
  // Rank r holds r + 1 tokens of width 2; dispatch gathers every rank's tokens along dim 0.
  const std::int64_t mine = rank() + 1;
  Tensor hidden =
      make_tensor({mine, 2}, DType::Float32, [&](std::int64_t i) { return rank_value(rank(), i); });
  Tensor logits = make_tensor({mine, 3}, DType::Float32,
                              [&](std::int64_t i) { return rank_value(rank(), i + 100); });
  auto routed = c.dispatch_router_logits(hidden, logits);
  std::vector<double> expected_hidden, expected_logits;
  std::int64_t total = 0;
  for (int r = 0; r < w; ++r) {
    for (std::int64_t i = 0; i < (r + 1) * 2; ++i) expected_hidden.push_back(rank_value(r, i));
    for (std::int64_t i = 0; i < (r + 1) * 3; ++i)
      expected_logits.push_back(rank_value(r, i + 100));
    total += r + 1;
  }
  if (w == 1) {
    EXPECT_EQ(routed.hidden_states.data_ptr(), hidden.data_ptr());  // no communicator at size 1
    return;
  }
  expect_tensor(routed.hidden_states, {total, 2}, DType::Float32, expected_hidden,
                "dispatch hidden");
  expect_tensor(routed.router_logits, {total, 3}, DType::Float32, expected_logits,
                "dispatch logits");
  // combine sums the experts' outputs over ranks and hands back this rank's tokens.
  Tensor combined = c.combine(routed.hidden_states);
  std::vector<double> expected_combined;
  for (std::int64_t i = 0; i < mine * 2; ++i)
    expected_combined.push_back(w * rank_value(rank(), i));
  expect_tensor(combined, {mine, 2}, DType::Float32, expected_combined, "combine");
}

TEST_F(CoordinatorBasics, BarrierOrdersRanks) {
  // Each rank publishes a key after the barrier; none may see a missing key of a lower phase.
  for (int round = 0; round < 3; ++round) {
    store()->set("phase" + std::to_string(round) + "/" + std::to_string(rank()), "1");
    world_coord().barrier();
    for (int r = 0; r < world_size(); ++r) {
      EXPECT_TRUE(store()->check({"phase" + std::to_string(round) + "/" + std::to_string(r)}));
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
