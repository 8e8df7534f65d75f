// DeviceCommunicator: the device-side half of a GroupCoordinator (vLLM's DeviceCommunicatorBase).
// A GroupCoordinator hands every tensor collective to one of these; implementations are looked up
// by name in a registry ("cpu": Gloo over host memory; "cuda": NCCL), so an engine can plug its
// own (register_device_communicator before creating groups).
//
// Collective rule: every method except send/recv/isend/irecv must be called by every rank of the
// group, in the same order, with matching shapes and dtypes. Rank arguments (src, dst) are ranks
// in the group. Results are new tensors (out of place) unless said otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "groupcoord/device.h"
#include "groupcoord/process_group.h"
#include "groupcoord/symmetric_memory.h"
#include "groupcoord/tensor.h"
#include "groupcoord/work.h"

namespace groupcoord {

/// What a communicator is built from (vLLM's constructor arguments).
struct DeviceCommunicatorContext {
  /// Gloo group over the same ranks: metadata, size exchanges, host tensors.
  std::shared_ptr<ProcessGroup> cpu_group;
  /// The backend's device group when it is a Gloo group ("gloo" backend), else nullptr (NCCL
  /// communicators build their own from cpu_group).
  std::shared_ptr<ProcessGroup> device_group;
  /// The device this rank works on (Device::cpu() for the cpu communicator).
  Device device = Device::cpu();
  /// The coordinator's unique name ("tp:0"), used in every error message.
  std::string unique_name;
  /// Enable dispatch/combine through an all-to-all manager (vLLM's use_all2all).
  bool use_all2all = false;
};

/// Result of dispatch(): hidden states, top-k weights and ids, and any extra tensors, each
/// gathered across the group along dim 0.
struct DispatchResult {
  Tensor hidden_states;
  Tensor topk_weights;
  Tensor topk_ids;
  std::vector<Tensor> extra_tensors;
};

/// Result of dispatch_router_logits().
struct DispatchRouterLogitsResult {
  Tensor hidden_states;
  Tensor router_logits;
  std::vector<Tensor> extra_tensors;
};

/// Interface of a device communicator. Implementations validate their arguments and throw
/// std::invalid_argument naming unique_name, the op and the offending value.
class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;

  /// Registry name of the implementation ("cpu", "cuda", ...).
  virtual std::string backend_name() const = 0;
  /// Rank in the group and group size.
  virtual int rank_in_group() const = 0;
  virtual int world_size() const = 0;

  /// Sum across the group, out of place.
  virtual Tensor all_reduce(const Tensor& input) = 0;
  /// Concatenation of every rank's `input` along `dim` (negative dims count from the end).
  virtual Tensor all_gather(const Tensor& input, int dim = -1) = 0;
  /// Concatenation along `dim` of inputs whose `dim` sizes may differ per rank: `sizes[r]` is
  /// rank r's size (std::nullopt: all equal to this rank's). Each input of the list is gathered
  /// separately (same sizes for all); the single-tensor form returns one result.
  virtual std::vector<Tensor> all_gatherv(
      const std::vector<Tensor>& inputs, int dim = 0,
      const std::optional<std::vector<std::int64_t>>& sizes = std::nullopt) = 0;
  /// One input (the usual case): by default the list form with one element; the built-in
  /// communicators skip the two vectors that costs.
  virtual Tensor all_gatherv(const Tensor& input, int dim = 0,
                             const std::optional<std::vector<std::int64_t>>& sizes = std::nullopt);
  /// Sum across the group, then this rank's 1/world_size slice along `dim` (the size of `dim`
  /// must divide evenly).
  virtual Tensor reduce_scatter(const Tensor& input, int dim = -1) = 0;
  /// As reduce_scatter with per-rank slice sizes along `dim` (`sizes` sums to the dim's size;
  /// std::nullopt: equal slices). Uniform sizes behave exactly as reduce_scatter.
  virtual Tensor reduce_scatterv(
      const Tensor& input, int dim = -1,
      const std::optional<std::vector<std::int64_t>>& sizes = std::nullopt) = 0;
  /// Concatenation along `dim` on rank `dst`; std::nullopt on the other ranks. Default: this
  /// communicator's all_gather, kept on `dst` (the built-in communicators send to `dst` only).
  virtual std::optional<Tensor> gather(const Tensor& input, int dst = 0, int dim = -1);
  /// Copies `src`'s tensor into `tensor` on every rank, in place; returns `tensor`.
  virtual Tensor broadcast(const Tensor& tensor, int src = 0) = 0;

  // ---- caller-provided outputs (beyond vLLM's API) ----
  // `out` must be defined, contiguous, on the communicator's device, of the input's dtype and of
  // the result's shape (std::invalid_argument naming the group, the op and the mismatch
  // otherwise); the result is written there and `out` is returned. all_reduce's `out` may be
  // `input` itself (in place). The built-in communicators allocate nothing on this path for
  // contiguous inputs along dim 0 (all_reduce: any dim); the defaults below compute the
  // out-of-place result and copy it, so a communicator that does not override them still works.
  /// all_reduce into `out` (input's shape).
  virtual Tensor all_reduce(const Tensor& input, const Tensor& out);
  /// all_gather into `out` (input's shape with `dim` multiplied by the world size).
  virtual Tensor all_gather(const Tensor& input, int dim, const Tensor& out);
  /// reduce_scatter into `out` (input's shape with `dim` divided by the world size).
  virtual Tensor reduce_scatter(const Tensor& input, int dim, const Tensor& out);
  /// recv into `out`, whose shape and dtype say what arrives (as torch.distributed.recv's
  /// tensor does), from group rank `src` (default: the previous rank).
  virtual Tensor recv(const Tensor& out, std::optional<int> src = std::nullopt);

  // ---- point-to-point (not collective). Defaults: std::invalid_argument naming the backend,
  // for a communicator that has no point-to-point transfers ----
  /// Blocking send to group rank `dst` (default: the next rank).
  virtual void send(const Tensor& tensor, std::optional<int> dst = std::nullopt);
  /// Blocking receive of a tensor of `shape` and `dtype` from group rank `src` (default: the
  /// previous rank).
  virtual Tensor recv(const Shape& shape, DType dtype, std::optional<int> src = std::nullopt);
  /// Asynchronous send/receive of a contiguous tensor; the tensor must stay alive (the Work
  /// keeps a reference) until the Work completes.
  virtual std::shared_ptr<Work> isend(const Tensor& tensor, int dst);
  virtual std::shared_ptr<Work> irecv(const Tensor& tensor, int src);

  // ---- MoE. Defaults: the inputs come back unchanged, as vLLM's communicator without an
  // all-to-all manager; the built-in communicators gather with use_all2all ----
  /// MoE: gathers every rank's tokens (dim 0, per-rank counts may differ) before the experts run.
  /// Without use_all2all the inputs come back unchanged.
  virtual DispatchRouterLogitsResult dispatch_router_logits(
      const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel = false,
      const std::vector<Tensor>& extra_tensors = {});
  virtual DispatchResult dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                                  const Tensor& topk_ids, bool is_sequence_parallel = false,
                                  const std::vector<Tensor>& extra_tensors = {});
  /// MoE: sums the experts' outputs across ranks and returns this rank's tokens (the inverse of
  /// the last dispatch). Without use_all2all, `hidden_states` comes back unchanged.
  virtual Tensor combine(const Tensor& hidden_states, bool is_sequence_parallel = false);

  // ---- NCCL symmetric memory (docs/cuda.md); communicators without it keep the defaults ----
  /// State and counters. Default: disabled, naming the backend.
  virtual SymmetricMemoryStats symmetric_memory_stats() const;
  /// Collective (same shape and dtype on every rank, same order): an uninitialised tensor inside
  /// the communicator's symmetric window, so that collectives on it skip the input copy. Default:
  /// std::invalid_argument naming the backend.
  virtual Tensor symmetric_empty(const Shape& shape, DType dtype);
  /// Collective (same value on every rank): makes the scratch window at least `bytes` now, outside
  /// CUDA graph capture, so that captured calls up to that size take the symmetric path. Default:
  /// std::invalid_argument naming the backend.
  virtual void reserve_symmetric_scratch(std::int64_t bytes);

  /// Collective over the ranks of the group not in `excluded` (group ranks), after a peer died or
  /// on request (GroupCoordinator::shrink): a communicator over the survivors, whose groups
  /// `context` carries (already shrunk), made from this one's connections where the backend can
  /// (NCCL's ncclCommShrink), and this one retired. Default, and when the backend cannot:
  /// nullptr, and the caller destroys this one and creates a fresh communicator from `context`.
  /// Every survivor gets the same answer (a backend agrees over `context.cpu_group` first).
  virtual std::unique_ptr<DeviceCommunicator> shrink(const std::vector<int>& excluded,
                                                     const DeviceCommunicatorContext& context);

  /// Releases resources (idempotent). Later calls throw DistributedError.
  virtual void destroy() = 0;
};

/// Builds a communicator for one group.
using DeviceCommunicatorFactory =
    std::function<std::unique_ptr<DeviceCommunicator>(const DeviceCommunicatorContext&)>;

/// Registers (or replaces) the factory for `name`. Thread-safe. Built-ins ("cpu", and "cuda" when
/// built with CUDA) are registered explicitly by register_builtin_device_communicators()
/// (group_coordinator.h: the coordinator layer is the lowest that sees them all).
void register_device_communicator(const std::string& name, DeviceCommunicatorFactory factory);
/// True when a factory is registered under `name`.
bool has_device_communicator(const std::string& name);
/// Names of all registered factories, sorted.
std::vector<std::string> registered_device_communicators();
/// Builds the communicator registered under `name`; std::invalid_argument for an unknown name
/// (the message lists the registered ones).
std::unique_ptr<DeviceCommunicator> create_device_communicator(
    const std::string& name, const DeviceCommunicatorContext& context);

/// One entry of the backend table, beside the communicator registry: what a GroupCoordinator made
/// with the backend name `name` (its `backend` argument, vLLM's torch_distributed_backend) uses.
/// Built in: {"gloo", "cpu", CPU, Gloo device group} and {"nccl", "cuda", CUDA, none}; an engine
/// registers its own communicator, then a backend naming it, and passes that backend name.
struct BackendInfo {
  std::string name;          ///< the backend argument: "gloo", "nccl" or an engine's
  std::string communicator;  ///< the registry name of its DeviceCommunicator ("cpu", "cuda", ...)
  DeviceType device_type = DeviceType::CPU;  ///< the tensors that communicator takes
  /// True when the communicator runs over a Gloo device group of its own (the coordinator makes
  /// one per group, as for gloo); false when it makes its own connections from the CPU group, as
  /// NCCL does. Host tensors of a backend whose device_type is CUDA go to the "cpu" communicator.
  bool gloo_device_group = false;
};

/// Adds (or replaces) the backend `info.name`. Thread-safe. std::invalid_argument when the name or
/// the communicator name is empty.
void register_backend(BackendInfo info);
/// True when a backend is registered under `name`.
bool has_backend(const std::string& name);
/// The backend registered under `name`; std::invalid_argument naming `what` (the caller's op) and
/// listing the registered backends otherwise.
BackendInfo find_backend(const std::string& name, const std::string& what);
/// Names of all registered backends, sorted.
std::vector<std::string> registered_backends();

}  // namespace groupcoord
