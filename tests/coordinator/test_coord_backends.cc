// The backend table: an engine registers a device communicator of its own and a backend naming
// it, and a GroupCoordinator made with that backend runs its collectives through it, end to end.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "coord_env.h"
#include "coord_tensors.h"
#include "groupcoord/device_communicator.h"
#include "groupcoord/group_coordinator.h"

namespace groupcoord {
namespace testing {
namespace {

/// Calls that reached the engine's communicator, in this process.
std::atomic<int> g_counted_calls{0};

/// An engine's communicator: the built-in "cpu" one underneath, every call counted.
class CountingCommunicator final : public DeviceCommunicator {
 public:
  explicit CountingCommunicator(const DeviceCommunicatorContext& context)
      : inner_(create_device_communicator("cpu", context)) {}

  std::string backend_name() const override { return "counting"; }
  int rank_in_group() const override { return inner_->rank_in_group(); }
  int world_size() const override { return inner_->world_size(); }

  Tensor all_reduce(const Tensor& input) override { return count(), inner_->all_reduce(input); }
  Tensor all_gather(const Tensor& input, int dim) override {
    return count(), inner_->all_gather(input, dim);
  }
  std::vector<Tensor> all_gatherv(const std::vector<Tensor>& inputs, int dim,
                                  const std::optional<std::vector<std::int64_t>>& sizes) override {
    return count(), inner_->all_gatherv(inputs, dim, sizes);
  }
  Tensor reduce_scatter(const Tensor& input, int dim) override {
    return count(), inner_->reduce_scatter(input, dim);
  }
  Tensor reduce_scatterv(const Tensor& input, int dim,
                         const std::optional<std::vector<std::int64_t>>& sizes) override {
    return count(), inner_->reduce_scatterv(input, dim, sizes);
  }
  std::optional<Tensor> gather(const Tensor& input, int dst, int dim) override {
    return count(), inner_->gather(input, dst, dim);
  }
  Tensor broadcast(const Tensor& tensor, int src) override {
    return count(), inner_->broadcast(tensor, src);
  }
  void send(const Tensor& tensor, std::optional<int> dst) override {
    count();
    inner_->send(tensor, dst);
  }
  Tensor recv(const Shape& shape, DType dtype, std::optional<int> src) override {
    return count(), inner_->recv(shape, dtype, src);
  }
  std::shared_ptr<Work> isend(const Tensor& tensor, int dst) override {
    return count(), inner_->isend(tensor, dst);
  }
  std::shared_ptr<Work> irecv(const Tensor& tensor, int src) override {
    return count(), inner_->irecv(tensor, src);
  }
  DispatchRouterLogitsResult dispatch_router_logits(
      const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel,
      const std::vector<Tensor>& extra_tensors) override {
    return count(), inner_->dispatch_router_logits(hidden_states, router_logits,
                                                   is_sequence_parallel, extra_tensors);
  }
  DispatchResult dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                          const Tensor& topk_ids, bool is_sequence_parallel,
                          const std::vector<Tensor>& extra_tensors) override {
    return count(), inner_->dispatch(hidden_states, topk_weights, topk_ids, is_sequence_parallel,
                                     extra_tensors);
  }
  Tensor combine(const Tensor& hidden_states, bool is_sequence_parallel) override {
    return count(), inner_->combine(hidden_states, is_sequence_parallel);
  }
  void destroy() override { inner_->destroy(); }

 private:
  static void count() { g_counted_calls.fetch_add(1); }

  std::unique_ptr<DeviceCommunicator> inner_;
};

/// The least an engine's communicator implements: the collectives. gather, point-to-point and MoE
/// come from DeviceCommunicator's defaults.
class MinimalCommunicator final : public DeviceCommunicator {
 public:
  explicit MinimalCommunicator(const DeviceCommunicatorContext& context)
      : inner_(create_device_communicator("cpu", context)) {}

  std::string backend_name() const override { return "minimal"; }
  int rank_in_group() const override { return inner_->rank_in_group(); }
  int world_size() const override { return inner_->world_size(); }
  Tensor all_reduce(const Tensor& input) override { return inner_->all_reduce(input); }
  Tensor all_gather(const Tensor& input, int dim) override {
    return inner_->all_gather(input, dim);
  }
  std::vector<Tensor> all_gatherv(const std::vector<Tensor>& inputs, int dim,
                                  const std::optional<std::vector<std::int64_t>>& sizes) override {
    return inner_->all_gatherv(inputs, dim, sizes);
  }
  Tensor reduce_scatter(const Tensor& input, int dim) override {
    return inner_->reduce_scatter(input, dim);
  }
  Tensor reduce_scatterv(const Tensor& input, int dim,
                         const std::optional<std::vector<std::int64_t>>& sizes) override {
    return inner_->reduce_scatterv(input, dim, sizes);
  }
  Tensor broadcast(const Tensor& tensor, int src) override {
    return inner_->broadcast(tensor, src);
  }
  void destroy() override { inner_->destroy(); }

 private:
  std::unique_ptr<DeviceCommunicator> inner_;
};

class CoordinatorBackends : public CoordinatorTest {
 protected:
  static void register_engine_backend() {
    register_device_communicator("counting", [](const DeviceCommunicatorContext& context) {
      return std::make_unique<CountingCommunicator>(context);
    });
    register_backend({"engine", "counting", DeviceType::CPU, /*gloo_device_group=*/true});
  }
};

// Rank r's values summed over `ranks` (the group), element by element.
std::vector<double> summed(const std::vector<int>& ranks, std::int64_t n) {
  std::vector<double> sum(n, 0.0);
  for (int r : ranks) {
    for (std::int64_t i = 0; i < n; ++i) sum[i] += rank_value(r, i);
  }
  return sum;
}

TEST_F(CoordinatorBackends, AnEngineBackendRunsTheCoordinatorsCollectivesThroughItsCommunicator) {
  register_engine_backend();
  const int w = world_size();
  GroupCoordinator c(world_layout(w), local_rank(), "engine", true, false, "engine_backend");
  EXPECT_EQ(c.backend(), "engine");
  EXPECT_TRUE(c.device().is_cpu());
  ASSERT_NE(c.device_group(), nullptr);  // gloo_device_group: a Gloo device group was made
  const int before = g_counted_calls.load();
  Tensor t =
      make_tensor({6}, DType::Float32, [&](std::int64_t i) { return rank_value(rank(), i); });
  expect_tensor(c.all_reduce(t), {6}, DType::Float32, summed(c.ranks(), 6), "all_reduce");

  std::vector<double> gathered;
  for (int r : c.ranks()) {
    for (std::int64_t i = 0; i < 6; ++i) gathered.push_back(rank_value(r, i));
  }
  expect_tensor(c.all_gather(t, 0), {6 * w}, DType::Float32, gathered, "all_gather");

  Tensor wide =
      make_tensor({2 * w}, DType::Float32, [&](std::int64_t i) { return rank_value(rank(), i); });
  const std::vector<double> total = summed(c.ranks(), 2 * w);
  const int me = c.rank_in_group();
  expect_tensor(c.reduce_scatter(wide, 0), {2}, DType::Float32, {total[2 * me], total[2 * me + 1]},
                "reduce_scatter");

  Tensor b = make_tensor({3}, DType::Float32,
                         [&](std::int64_t i) { return rank_value(rank(), i) * (me == 0); });
  expect_tensor(
      c.broadcast(b, 0), {3}, DType::Float32,
      {rank_value(c.ranks()[0], 0), rank_value(c.ranks()[0], 1), rank_value(c.ranks()[0], 2)},
      "broadcast");
  // World size 1 bypasses the communicator (as vLLM); otherwise all_reduce, all_gather and
  // reduce_scatter went through it, while broadcast, as vLLM's, runs on the Gloo device group.
  EXPECT_EQ(g_counted_calls.load() - before, w == 1 ? 0 : 3);
  if (w > 1) {
    ASSERT_NE(c.device_communicator(), nullptr);
    EXPECT_EQ(c.device_communicator()->backend_name(), "counting");
    std::shared_ptr<DeviceCommunicator> sibling = c.make_sibling_device_group("engine_sibling");
    EXPECT_EQ(sibling->backend_name(), "counting");
    expect_tensor(sibling->all_reduce(t), {6}, DType::Float32, summed(c.ranks(), 6),
                  "sibling all_reduce");
    sibling->destroy();
  }
  c.destroy();
}

TEST_F(CoordinatorBackends, AMinimalCommunicatorGetsGatherPointToPointAndMoeFromTheDefaults) {
  register_device_communicator("minimal", [](const DeviceCommunicatorContext& context) {
    return std::make_unique<MinimalCommunicator>(context);
  });
  register_backend({"minimal", "minimal", DeviceType::CPU, /*gloo_device_group=*/true});
  const int w = world_size();
  GroupCoordinator c(world_layout(w), local_rank(), "minimal", true, false, "minimal_backend",
                     /*use_all2all=*/true);
  if (w == 1) return;  // no communicator at world size 1
  Tensor t =
      make_tensor({2}, DType::Float32, [&](std::int64_t i) { return rank_value(rank(), i); });
  // gather: the default's all_gather, kept on dst only.
  std::vector<double> gathered;
  for (int r : c.ranks()) {
    for (std::int64_t i = 0; i < 2; ++i) gathered.push_back(rank_value(r, i));
  }
  const int dst = w - 1;
  std::optional<Tensor> got = c.gather(t, dst, 0);
  EXPECT_EQ(got.has_value(), c.rank_in_group() == dst);
  if (got) expect_tensor(*got, {2 * w}, DType::Float32, gathered, "gather");
  // MoE without an all-to-all manager: the inputs come back unchanged.
  Tensor logits = make_tensor({2}, DType::Float32, [](std::int64_t i) { return 1.0 * i; });
  DispatchRouterLogitsResult routed = c.dispatch_router_logits(t, logits);
  EXPECT_EQ(routed.hidden_states.data_ptr(), t.data_ptr());
  EXPECT_EQ(c.combine(t).data_ptr(), t.data_ptr());
  // Point-to-point: a clear error naming the backend, on the calling rank only (not collective).
  expect_invalid_argument([&] { c.send(t, (c.rank_in_group() + 1) % w); },
                          {"send", "minimal", "no point-to-point"});
  c.destroy();
}

TEST_F(CoordinatorBackends, UnknownOrUnusableBackendsRaiseOnEveryRankNamingTheProblem) {
  register_builtin_device_communicators();
  const int w = world_size();
  expect_invalid_argument(
      [&] {
        GroupCoordinator c(world_layout(w), local_rank(), "mpi", true, false, "engine_bad_backend");
      },
      {"engine_bad_backend", "unknown backend 'mpi'", "registered: [", "gloo", "nccl"});
  // A backend whose communicator nobody registered says which one is missing.
  register_backend({"dangling", "not_registered", DeviceType::CPU, true});
  expect_invalid_argument(
      [&] {
        GroupCoordinator c(world_layout(w), local_rank(), "dangling", true, false, "dangling");
      },
      {"dangling", "device communicator 'not_registered'", "not registered"});
  EXPECT_THROW(register_backend({"", "cpu", DeviceType::CPU, true}), std::invalid_argument);
  EXPECT_THROW(register_backend({"x", "", DeviceType::CPU, true}), std::invalid_argument);
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
