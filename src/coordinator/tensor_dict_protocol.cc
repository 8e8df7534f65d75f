// vLLM's tensor-dict protocol. A dict travels as its metadata list (tensor_metadata.h), sent as
// one object over the CPU group, followed by each non-empty tensor: host tensors over the CPU
// group, device tensors through the device communicator. Empty tensors are rebuilt from the
// metadata alone. Receivers see the keys in the sender's order. broadcast_tensor_dict sends the
// host tensors of up to 64 KiB together, in one buffer, before the others.
//
// all_gather_group (send/recv only): a tensor whose element count divides by that group's size
// (or that all_gather_tensors forces) travels as the all_gather_group rank's slice
// reshape(ag_size, -1)[ag_rank]; the receivers all_gather the slices over all_gather_group
// (dim 0) and reshape to the original shape. Sending and receiving ranks must agree on
// all_gather_group's size and ranks, as in vLLM.
#include <cstring>
#include <utility>

#include "coordinator/coordinator_checks.h"
#include "coordinator/group_coordinator_impl.h"
#include "coordinator/host_transfers.h"
#include "coordinator/object_protocol.h"
#include "coordinator/tensor_metadata.h"
#include "groupcoord/check.h"

namespace groupcoord {

using namespace coordinator_detail;  // NOLINT: this file only implements the coordinator

namespace {

// vLLM's _should_use_all_gather.
bool should_use_all_gather(const std::string& key, std::int64_t numel,
                           const GroupCoordinator* all_gather_group,
                           const std::optional<AllGatherTensors>& all_gather_tensors) {
  if (all_gather_group == nullptr) return false;
  bool use = numel % all_gather_group->world_size() == 0;
  if (all_gather_tensors) {
    for (const auto& [name, value] : *all_gather_tensors) {
      if (name == key) use = value;
    }
  }
  return use;
}

void check_divisible(const comm::OpLabel& label, const std::string& key, std::int64_t numel,
                     const GroupCoordinator& all_gather_group) {
  GC_CHECK(numel % all_gather_group.world_size() == 0, label, ": tensor '", key, "' has ", numel,
           " elements, which do not split evenly over all_gather_group ",
           all_gather_group.unique_name(), " of size ", all_gather_group.world_size(),
           " (all_gather_tensors forces the all_gather path for it)");
}

// The all_gather_group rank's share of a contiguous tensor: reshape(ag_size, -1)[ag_rank].
Tensor all_gather_slice(const Tensor& contiguous, const GroupCoordinator& all_gather_group) {
  return contiguous.reshape({all_gather_group.world_size(), -1})
      .narrow(0, all_gather_group.rank_in_group(), 1)
      .reshape({-1});
}

// An explicit peer is range-checked even when the call is bypassed (world size 1).
void check_explicit_peer(const comm::OpLabel& label, const char* what, std::optional<int> peer,
                         int world_size) {
  if (peer) check_group_rank(label, what, *peer, world_size);
}

}  // namespace

// ---- Impl helpers ----------------------------------------------------------------------------

Device GroupCoordinator::Impl::device_for(DeviceType type) const {
  if (type == DeviceType::CPU) return Device::cpu();
  return device.is_cuda() ? device : Device::cuda(local_rank);
}

void GroupCoordinator::Impl::check_route(const char* op, const std::string& key,
                                         Device tensor_device) const {
  if (tensor_device.is_cpu()) return;
  GC_CHECK(communicator != nullptr, label(op), ": No device communicator found for tensor '", key,
           "' on ", tensor_device.str());
}

void GroupCoordinator::Impl::broadcast_dict_tensor(const Tensor& tensor, int src) {
  if (tensor.device().is_cpu()) {
    broadcast_host_tensor(*cpu_group, tensor, src);
  } else {
    communicator->broadcast(tensor, src);
  }
}

std::shared_ptr<Work> GroupCoordinator::Impl::isend_dict_tensor(const Tensor& tensor, int dst) {
  if (tensor.device().is_cpu()) return isend_host_tensor(*cpu_group, tensor, dst, kTensorDictTag);
  return communicator->isend(tensor, dst);
}

std::shared_ptr<Work> GroupCoordinator::Impl::irecv_dict_tensor(const Tensor& tensor, int src) {
  if (tensor.device().is_cpu()) return irecv_host_tensor(*cpu_group, tensor, src, kTensorDictTag);
  return communicator->irecv(tensor, src);
}

// ---- broadcast -------------------------------------------------------------------------------

namespace {

// Host tensors up to this size travel together in one broadcast (a decode step's metadata is a
// dozen small arrays: one collective instead of one each); larger ones go on their own, without
// the extra copies.
constexpr std::size_t kPackedHostBytes = std::size_t{64} << 10;

bool packs(const Tensor& tensor) {
  return tensor.device().is_cpu() && tensor.numel() > 0 && tensor.nbytes() <= kPackedHostBytes;
}

// Broadcasts the packed host tensors of `tensors` (every rank passes its tensors in dict order,
// the source its values, the others tensors of the same shapes to fill) in one buffer.
void broadcast_packed(ProcessGroup& group, const std::vector<Tensor>& tensors, int src) {
  std::size_t total = 0;
  for (const Tensor& t : tensors) {
    if (packs(t)) total += t.nbytes();
  }
  if (total == 0) return;
  Tensor packed = Tensor::empty({static_cast<std::int64_t>(total)}, DType::UInt8, Device::cpu());
  auto* bytes = static_cast<std::uint8_t*>(packed.data_ptr());
  const bool source = group.rank() == src;
  auto each = [&](auto&& move) {
    std::size_t offset = 0;
    for (const Tensor& t : tensors) {
      if (!packs(t)) continue;
      move(t, bytes + offset);
      offset += t.nbytes();
    }
  };
  if (source) {
    each([](const Tensor& t, std::uint8_t* at) {
      const Tensor compact = t.contiguous();
      std::memcpy(at, compact.data_ptr(), compact.nbytes());
    });
  }
  group.broadcast(bytes, total, DType::UInt8, src);
  if (!source) {
    each([](const Tensor& t, std::uint8_t* at) { std::memcpy(t.data_ptr(), at, t.nbytes()); });
  }
}

}  // namespace

std::optional<TensorDict> GroupCoordinator::broadcast_tensor_dict(
    const std::optional<TensorDict>& tensor_dict, int src) {
  Impl& s = *impl_;
  s.check_alive("broadcast_tensor_dict");
  const comm::OpLabel label = s.label("broadcast_tensor_dict");
  check_group_rank(label, "src", src, s.world_size);
  if (s.world_size == 1) return tensor_dict;

  if (s.rank_in_group == src) {
    GC_CHECK(tensor_dict.has_value(), label, ": src ", src, " (this rank) passed no tensor dict");
    SplitTensorDict split = split_tensor_dict(*tensor_dict, comm::to_string(label));
    for (const auto& [key, tensor] : split.tensors) {
      s.check_route("broadcast_tensor_dict", key, tensor.device());
    }
    broadcast_object(encode_metadata(split.metadata), src);
    std::vector<Tensor> tensors;
    for (const auto& item : split.tensors) tensors.push_back(item.second);
    broadcast_packed(*s.cpu_group, tensors, src);
    for (const Tensor& tensor : tensors) {
      if (tensor.numel() > 0 && !packs(tensor)) s.broadcast_dict_tensor(tensor, src);
    }
    return tensor_dict;
  }

  const auto metadata =
      decode_metadata(broadcast_object(std::nullopt, src), comm::to_string(label));
  TensorDict result;
  result.reserve(metadata.size());
  std::vector<Tensor> tensors;  // in dict order, as the source sends them
  for (const MetadataEntry& entry : metadata) {
    if (entry.kind == MetadataEntry::Kind::Bytes) {
      result.emplace_back(entry.key, entry.value);
      continue;
    }
    Tensor tensor = Tensor::empty(entry.shape, entry.dtype, s.device_for(entry.device_type));
    if (tensor.numel() > 0) s.check_route("broadcast_tensor_dict", entry.key, tensor.device());
    tensors.push_back(tensor);
    result.emplace_back(entry.key, tensor);
  }
  broadcast_packed(*s.cpu_group, tensors, src);
  for (const Tensor& tensor : tensors) {
    if (tensor.numel() > 0 && !packs(tensor)) s.broadcast_dict_tensor(tensor, src);
  }
  return result;
}

// ---- send ------------------------------------------------------------------------------------

std::optional<TensorDict> GroupCoordinator::send_tensor_dict(
    const TensorDict& tensor_dict, std::optional<int> dst, GroupCoordinator* all_gather_group,
    const std::optional<AllGatherTensors>& all_gather_tensors) {
  Impl& s = *impl_;
  s.check_alive("send_tensor_dict");
  check_explicit_peer(s.label("send_tensor_dict"), "dst", dst, s.world_size);
  if (s.world_size == 1) return tensor_dict;
  auto handles = isend_tensor_dict(tensor_dict, dst, all_gather_group, all_gather_tensors);
  for (const auto& handle : handles) handle->wait();
  // Waited for: the retention entry isend_tensor_dict appended has nothing left to protect.
  s.pending_isends.drop(handles);
  return std::nullopt;
}

std::vector<std::shared_ptr<Work>> GroupCoordinator::isend_tensor_dict(
    const TensorDict& tensor_dict, std::optional<int> dst, GroupCoordinator* all_gather_group,
    const std::optional<AllGatherTensors>& all_gather_tensors) {
  Impl& s = *impl_;
  const char* op = "isend_tensor_dict";
  s.check_alive(op);
  const comm::OpLabel label = s.label(op);
  check_explicit_peer(label, "dst", dst, s.world_size);
  if (s.world_size <= 1) return {};
  const int peer = s.resolve_peer(op, "dst", dst);

  // Everything is checked and sliced before the first message leaves: a bad dict sends nothing.
  SplitTensorDict split = split_tensor_dict(tensor_dict, comm::to_string(label));
  std::vector<Tensor> pieces;
  for (const auto& [key, tensor] : split.tensors) {
    if (tensor.numel() == 0) continue;
    s.check_route(op, key, tensor.device());
    if (should_use_all_gather(key, tensor.numel(), all_gather_group, all_gather_tensors)) {
      check_divisible(label, key, tensor.numel(), *all_gather_group);
      pieces.push_back(all_gather_slice(tensor.contiguous(), *all_gather_group));
    } else {
      pieces.push_back(tensor);
    }
  }

  // Bound the retention FIFO before adding to it.
  s.pending_isends.reap();
  std::vector<std::shared_ptr<Work>> handles;
  try {
    handles.push_back(isend_object_bytes(*s.cpu_group, encode_metadata(split.metadata), peer));
    for (const Tensor& piece : pieces) handles.push_back(s.isend_dict_tensor(piece, peer));
  } catch (...) {
    // Whatever was posted stays retained until it completes.
    s.pending_isends.push(std::move(handles), std::move(pieces));
    throw;
  }
  s.pending_isends.push(handles, std::move(pieces));
  return handles;
}

// ---- receive ---------------------------------------------------------------------------------

std::optional<TensorDict> GroupCoordinator::recv_tensor_dict(
    std::optional<int> src, GroupCoordinator* all_gather_group,
    const std::optional<AllGatherTensors>& all_gather_tensors) {
  Impl& s = *impl_;
  s.check_alive("recv_tensor_dict");
  check_explicit_peer(s.label("recv_tensor_dict"), "src", src, s.world_size);
  if (s.world_size == 1) return std::nullopt;
  IrecvTensorDictResult pending = irecv_tensor_dict(src, all_gather_group, all_gather_tensors);
  for (const auto& handle : pending.handles) handle->wait();
  for (const auto& step : pending.postprocess) step();
  return std::move(*pending.tensor_dict);
}

IrecvTensorDictResult GroupCoordinator::irecv_tensor_dict(
    std::optional<int> src, GroupCoordinator* all_gather_group,
    const std::optional<AllGatherTensors>& all_gather_tensors) {
  Impl& s = *impl_;
  const char* op = "irecv_tensor_dict";
  s.check_alive(op);
  const comm::OpLabel label = s.label(op);
  check_explicit_peer(label, "src", src, s.world_size);
  IrecvTensorDictResult result;
  if (s.world_size == 1) return result;
  const int peer = s.resolve_peer(op, "src", src);

  const auto metadata = decode_metadata(
      recv_object_bytes(*s.cpu_group, peer, comm::to_string(label)), comm::to_string(label));
  auto dict = std::make_shared<TensorDict>();
  dict->reserve(metadata.size());
  result.tensor_dict = dict;
  for (const MetadataEntry& entry : metadata) {
    if (entry.kind == MetadataEntry::Kind::Bytes) {
      dict->emplace_back(entry.key, entry.value);
      continue;
    }
    Tensor full = Tensor::empty(entry.shape, entry.dtype, s.device_for(entry.device_type));
    if (full.numel() == 0) {
      dict->emplace_back(entry.key, full);
      continue;
    }
    s.check_route(op, entry.key, full.device());
    if (!should_use_all_gather(entry.key, full.numel(), all_gather_group, all_gather_tensors)) {
      result.handles.push_back(s.irecv_dict_tensor(full, peer));
      dict->emplace_back(entry.key, full);
      continue;
    }
    check_divisible(label, entry.key, full.numel(), *all_gather_group);
    Tensor slice = all_gather_slice(full, *all_gather_group);
    result.handles.push_back(s.irecv_dict_tensor(slice, peer));
    const std::size_t index = dict->size();
    dict->emplace_back(entry.key, slice);
    // Collective over all_gather_group: every receiving rank of it runs its steps in order.
    result.postprocess.push_back([dict, index, slice, shape = entry.shape, all_gather_group] {
      (*dict)[index].second = all_gather_group->all_gather(slice, 0).reshape(shape);
    });
  }
  return result;
}

}  // namespace groupcoord
