// GroupCoordinator's tensor collectives, barrier, point-to-point tensors, sibling groups and MoE
// routing. Each collective follows vLLM: bypass at world size 1 (returning the input), else hand
// the tensor to the device communicator. Arguments are checked here (coordinator_checks.h), so
// the messages do not depend on the communicator plugged in.
#include <utility>

#include "communicator/output_tensor.h"
#include "coordinator/coordinator_checks.h"
#include "coordinator/coordinator_setup.h"
#include "coordinator/group_coordinator_impl.h"
#include "coordinator/host_transfers.h"
#include "groupcoord/check.h"
#include "groupcoord/world.h"

namespace groupcoord {

using namespace coordinator_detail;  // NOLINT: this file only implements the coordinator

Tensor GroupCoordinator::all_reduce(const Tensor& input) {
  Impl& s = *impl_;
  s.check_alive("all_reduce");
  if (s.world_size == 1) return input;
  check_tensor(s.label("all_reduce"), input);
  return s.communicator_for("all_reduce", input).all_reduce(input);
}

Tensor GroupCoordinator::all_gather(const Tensor& input, int dim) {
  Impl& s = *impl_;
  s.check_alive("all_gather");
  if (s.world_size == 1) return input;
  check_dim(s.label("all_gather"), input, dim);
  return s.communicator_for("all_gather", input).all_gather(input, dim);
}

Tensor GroupCoordinator::all_gatherv(const Tensor& input, int dim,
                                     const std::optional<std::vector<std::int64_t>>& sizes) {
  Impl& s = *impl_;
  s.check_alive("all_gatherv");
  s.require_communicator("all_gatherv");
  DeviceCommunicator& comm = s.communicator_for("all_gatherv", input);
  check_gatherv_sizes(s.label("all_gatherv"), input, dim, sizes, s.world_size, s.rank_in_group);
  return comm.all_gatherv(input, dim, sizes);  // one input: no vectors
}

std::vector<Tensor> GroupCoordinator::all_gatherv(
    const std::vector<Tensor>& inputs, int dim,
    const std::optional<std::vector<std::int64_t>>& sizes) {
  Impl& s = *impl_;
  s.check_alive("all_gatherv");
  s.require_communicator("all_gatherv");
  const comm::OpLabel label = s.label("all_gatherv");
  GC_CHECK(!inputs.empty(), label, ": the list of inputs is empty");
  DeviceCommunicator& comm = s.communicator_for("all_gatherv", inputs.front());
  for (const Tensor& input : inputs) {
    check_gatherv_sizes(label, input, dim, sizes, s.world_size, s.rank_in_group);
  }
  return comm.all_gatherv(inputs, dim, sizes);
}

Tensor GroupCoordinator::reduce_scatter(const Tensor& input, int dim) {
  Impl& s = *impl_;
  s.check_alive("reduce_scatter");
  if (s.world_size == 1) return input;
  const comm::OpLabel label = s.label("reduce_scatter");
  check_dim(label, input, dim);
  DeviceCommunicator& comm = s.communicator_for("reduce_scatter", input);
  check_scatterv_sizes(label, input, dim, std::nullopt, s.world_size);
  return comm.reduce_scatter(input, dim);
}

// Caller-provided outputs: the coordinator checks the input as for the out-of-place call and
// leaves `out` to the communicator, except at world size 1, where it copies the input.
Tensor GroupCoordinator::all_reduce(const Tensor& input, const Tensor& out) {
  Impl& s = *impl_;
  s.check_alive("all_reduce");
  const comm::OpLabel label = s.label("all_reduce");
  check_tensor(label, input);
  if (s.world_size == 1) return copy_into_output(s.unique_name, "all_reduce", input, out);
  return s.communicator_for("all_reduce", input).all_reduce(input, out);
}

Tensor GroupCoordinator::all_gather(const Tensor& input, int dim, const Tensor& out) {
  Impl& s = *impl_;
  s.check_alive("all_gather");
  const comm::OpLabel label = s.label("all_gather");
  check_dim(label, input, dim);
  if (s.world_size == 1) return copy_into_output(s.unique_name, "all_gather", input, out);
  return s.communicator_for("all_gather", input).all_gather(input, dim, out);
}

Tensor GroupCoordinator::reduce_scatter(const Tensor& input, int dim, const Tensor& out) {
  Impl& s = *impl_;
  s.check_alive("reduce_scatter");
  const comm::OpLabel label = s.label("reduce_scatter");
  check_dim(label, input, dim);
  if (s.world_size == 1) return copy_into_output(s.unique_name, "reduce_scatter", input, out);
  DeviceCommunicator& comm = s.communicator_for("reduce_scatter", input);
  check_scatterv_sizes(label, input, dim, std::nullopt, s.world_size);
  return comm.reduce_scatter(input, dim, out);
}

Tensor GroupCoordinator::reduce_scatterv(const Tensor& input, int dim,
                                         const std::optional<std::vector<std::int64_t>>& sizes) {
  Impl& s = *impl_;
  s.check_alive("reduce_scatterv");
  DeviceCommunicator& comm = s.communicator_for("reduce_scatterv", input);
  check_scatterv_sizes(s.label("reduce_scatterv"), input, dim, sizes, s.world_size);
  return comm.reduce_scatterv(input, dim, sizes);
}

std::optional<Tensor> GroupCoordinator::gather(const Tensor& input, int dst, int dim) {
  Impl& s = *impl_;
  s.check_alive("gather");
  const comm::OpLabel label = s.label("gather");
  check_group_rank(label, "dst", dst, s.world_size);
  if (s.world_size == 1) return input;
  DeviceCommunicator& comm = s.communicator_for("gather", input);
  check_dim(label, input, dim);
  return comm.gather(input, dst, dim);
}

Tensor GroupCoordinator::broadcast(const Tensor& input, int src) {
  Impl& s = *impl_;
  s.check_alive("broadcast");
  const comm::OpLabel label = s.label("broadcast");
  check_group_rank(label, "src", src, s.world_size);
  if (s.world_size == 1) return input;
  check_tensor(label, input);
  // vLLM broadcasts on the device group directly; that is the Gloo device group for host
  // tensors, and the communicator (NCCL) otherwise.
  if (input.device().is_cpu()) {
    // Host tensors never go through NCCL: the CPU group carries them on the nccl backend.
    broadcast_host_tensor(s.device_group ? *s.device_group : *s.cpu_group, input, src);
    return input;
  }
  return s.require_communicator("broadcast").broadcast(input, src);
}

void GroupCoordinator::barrier() {
  Impl& s = *impl_;
  s.check_alive("barrier");
  s.cpu_group->barrier();
}

void GroupCoordinator::send(const Tensor& tensor, std::optional<int> dst) {
  Impl& s = *impl_;
  s.check_alive("send");
  s.require_communicator("send");
  const int peer = s.resolve_peer("send", "dst", dst);
  check_tensor(s.label("send"), tensor);
  DeviceCommunicator& comm = s.communicator_for("send", tensor);
  comm.send(tensor, peer);
}

Tensor GroupCoordinator::recv(const Shape& size, DType dtype, std::optional<int> src) {
  Impl& s = *impl_;
  s.check_alive("recv");
  DeviceCommunicator& comm = s.require_communicator("recv");
  const int peer = s.resolve_peer("recv", "src", src);
  return comm.recv(size, dtype, peer);
}

Tensor GroupCoordinator::recv(const Tensor& out, std::optional<int> src) {
  Impl& s = *impl_;
  s.check_alive("recv");
  DeviceCommunicator& comm = s.communicator_for("recv", out);  // host tensors as send's
  const int peer = s.resolve_peer("recv", "src", src);
  return comm.recv(out, peer);
}

std::shared_ptr<DeviceCommunicator> GroupCoordinator::make_sibling_device_group(
    std::optional<std::string> group_desc) {
  Impl& s = *impl_;
  s.check_alive("make_sibling_device_group");
  const std::string name = s.unique_name + "/" + group_desc.value_or("sibling");
  DeviceCommunicatorContext context;
  context.cpu_group = s.cpu_group;
  context.device = s.device;
  context.unique_name = name;
  context.use_all2all = s.use_all2all;
  // Collective over all world ranks for the gloo backend (one new group per list, as vLLM's
  // new_group loop); an NCCL communicator makes its own connections from the CPU group.
  if (s.backend == "gloo") {
    context.device_group = create_sibling_groups(*world_group(), s.group_ranks, name, s.timeout);
  }
  return create_device_communicator(s.backend == "nccl" ? "cuda" : "cpu", context);
}

DispatchRouterLogitsResult GroupCoordinator::dispatch_router_logits(
    const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel,
    const std::vector<Tensor>& extra_tensors) {
  Impl& s = *impl_;
  s.check_alive("dispatch_router_logits");
  if (!s.communicator) return {hidden_states, router_logits, extra_tensors};
  return s.communicator->dispatch_router_logits(hidden_states, router_logits, is_sequence_parallel,
                                                extra_tensors);
}

DispatchResult GroupCoordinator::dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                                          const Tensor& topk_ids, bool is_sequence_parallel,
                                          const std::vector<Tensor>& extra_tensors) {
  Impl& s = *impl_;
  s.check_alive("dispatch");
  if (!s.communicator) return {hidden_states, topk_weights, topk_ids, extra_tensors};
  return s.communicator->dispatch(hidden_states, topk_weights, topk_ids, is_sequence_parallel,
                                  extra_tensors);
}

Tensor GroupCoordinator::combine(const Tensor& hidden_states, bool is_sequence_parallel) {
  Impl& s = *impl_;
  s.check_alive("combine");
  if (!s.communicator) return hidden_states;
  return s.communicator->combine(hidden_states, is_sequence_parallel);
}

}  // namespace groupcoord
