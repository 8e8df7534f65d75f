// GroupCoordinator::Impl: the coordinator's private state and the helpers its operations share.
// Only group_coordinator.cc includes it; it is a header so that the class's state reads apart
// from its operations.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "communicator/op_label.h"
#include "coordinator/object_broadcaster.h"
#include "coordinator/pending_isends.h"
#include "groupcoord/device.h"
#include "groupcoord/device_communicator.h"
#include "groupcoord/group_coordinator.h"
#include "groupcoord/process_group.h"

namespace groupcoord {

/// See the file comment.
struct GroupCoordinator::Impl {
  // ---- identity (vLLM's attributes) ----
  std::string unique_name;
  int rank = -1;  ///< world rank
  int local_rank = -1;
  int rank_in_group = -1;
  int world_size = 0;
  std::vector<int> ranks;  ///< world ranks of this rank's group
  std::vector<std::vector<int>> group_ranks;
  std::string backend;       ///< its name: "gloo", "nccl" or an engine's (register_backend)
  BackendInfo backend_info;  ///< what the backend uses (the backend table)
  Device device = Device::cpu();
  std::chrono::milliseconds timeout{0};
  bool use_device_communicator = false;
  bool use_message_queue_broadcaster = false;
  bool use_all2all = false;

  // ---- resources ----
  std::shared_ptr<ProcessGroup> cpu_group;
  std::shared_ptr<ProcessGroup> device_group;  ///< backends with a Gloo device group only
  std::unique_ptr<DeviceCommunicator> communicator;
  /// CUDA backends only: a "cpu" communicator over cpu_group, so host tensors never reach NCCL.
  std::unique_ptr<DeviceCommunicator> host_communicator;
  /// broadcast_object's message-queue fast path (object_broadcaster.h): set when
  /// use_message_queue_broadcaster holds and the queue can serve the group; null otherwise.
  std::unique_ptr<coordinator_detail::ObjectBroadcaster> mq_broadcaster;
  coordinator_detail::PendingIsends pending_isends;
  bool destroyed = false;

  // ---- shrinks (docs/elastic.md) ----
  int world_epoch = 0;  ///< world shrinks this coordinator has followed (world_shrinks())
  /// Why a failed shrink left the coordinator unusable; empty while it is usable.
  std::string failed_shrink;
  /// Communicators replaced by a shrink: kept (retired, not freed) so that a reference an engine
  /// or the Python binding still holds never dangles.
  std::vector<std::unique_ptr<DeviceCommunicator>> retired_communicators;

  /// "<unique_name> <op>", for messages; formatted only when a message is written.
  comm::OpLabel label(const char* op) const { return comm::OpLabel{unique_name, op}; }
  /// Throws DistributedError naming `op` after destroy() or a failed shrink.
  void check_alive(const char* op) const;
  /// What a communicator of this group is built from.
  DeviceCommunicatorContext communicator_context() const;
  /// The device communicator (and, for a device backend, the host one) when the group has more
  /// than one rank and use_device_communicator; collective over the group.
  void make_communicators();
  /// CUDA backends: the "cpu" communicator over cpu_group that carries host tensors.
  void make_host_communicator();
  /// Collective over the survivors: new groups, communicators and queue without the group ranks
  /// `excluded` (possibly none), with `new_world_ranks` as the members' world ranks; `shrink_id`
  /// (the same on every survivor) names the new groups' store prefixes.
  void shrink_groups(const std::vector<int>& excluded, const std::vector<int>& new_world_ranks,
                     const std::string& shrink_id);
  /// The message-queue broadcaster over cpu_group, when the group wants one and has peers.
  void remake_queue();
  /// The communicator, or std::invalid_argument "No device communicator found" naming `op`.
  DeviceCommunicator& require_communicator(const char* op) const;
  /// The communicator for `tensor`: host_communicator for host tensors when there is one (nccl
  /// backend), else require_communicator(op).
  DeviceCommunicator& communicator_for(const char* op, const Tensor& tensor) const;
  /// Validates an explicit or default peer for point-to-point `op`: in range and not this rank.
  /// `what` is "dst" or "src"; the default is the next (dst) or previous (src) group rank.
  int resolve_peer(const char* op, const char* what, std::optional<int> peer) const;
  /// Validates `src` of a source's failure report `op`: in range and this rank.
  void check_is_source(const char* op, int src) const;

  // ---- tensor-dict helpers ----
  /// Where a received tensor whose sender had it on a `type` device lives on this rank.
  Device device_for(DeviceType type) const;
  /// Throws unless a tensor on `device` can travel: host tensors always (CPU group), others
  /// through the communicator.
  void check_route(const char* op, const std::string& key, Device device) const;
  /// Moves one tensor of a dict: host tensors over the CPU group (vLLM's metadata_group), others
  /// through the device communicator.
  void broadcast_dict_tensor(const Tensor& tensor, int src);
  std::shared_ptr<Work> isend_dict_tensor(const Tensor& tensor, int dst);
  std::shared_ptr<Work> irecv_dict_tensor(const Tensor& tensor, int src);
};

}  // namespace groupcoord
