// GroupCoordinator's object operations. Objects are Bytes (Python pickles them); everything goes
// over the Gloo CPU group (object_protocol.h), including broadcast_object_list, which vLLM sends
// over the device group (with NCCL that costs a host-device round trip for pure host data).
#include <utility>

#include "coordinator/coordinator_checks.h"
#include "coordinator/group_coordinator_impl.h"
#include "coordinator/object_protocol.h"
#include "groupcoord/check.h"

namespace groupcoord {

using namespace coordinator_detail;  // NOLINT: this file only implements the coordinator

Bytes GroupCoordinator::broadcast_object(const std::optional<Bytes>& obj, int src) {
  Impl& s = *impl_;
  s.check_alive("broadcast_object");
  const comm::OpLabel label = s.label("broadcast_object");
  check_group_rank(label, "src", src, s.world_size);
  GC_CHECK(s.rank_in_group != src || obj.has_value(), label, ": src ", src,
           " (this rank) passed no object to broadcast");
  if (s.world_size == 1) return *obj;
  if (s.mq_broadcaster && s.mq_broadcaster->writer_rank() == src) {
    return s.mq_broadcaster->broadcast_object(obj);
  }
  return broadcast_object_bytes(*s.cpu_group, obj, src);
}

std::vector<Bytes> GroupCoordinator::broadcast_object_list(const std::vector<Bytes>& obj_list,
                                                           int src) {
  Impl& s = *impl_;
  s.check_alive("broadcast_object_list");
  const comm::OpLabel label = s.label("broadcast_object_list");
  check_group_rank(label, "src", src, s.world_size);
  if (s.world_size == 1) return obj_list;
  const bool is_src = s.rank_in_group == src;
  // One object carrying the whole list, so receivers learn its length from the source and can
  // check theirs after the collective has completed (the group stays in step either way).
  std::optional<Bytes> packed;
  if (is_src) packed = pack_object_list(obj_list);
  Bytes received = broadcast_object_bytes(*s.cpu_group, packed, src);
  if (is_src) return obj_list;
  std::vector<Bytes> objects = unpack_object_list(received, comm::to_string(label));
  GC_CHECK(objects.size() == obj_list.size(), label, ": this rank passed a list of ",
           obj_list.size(), " objects but src ", src, " broadcast ", objects.size());
  return objects;
}

void GroupCoordinator::send_object(const Bytes& obj, int dst) {
  Impl& s = *impl_;
  s.check_alive("send_object");
  const comm::OpLabel label = s.label("send_object");
  check_group_rank(label, "dst", dst, s.world_size);
  check_not_self(label, "dst", dst, s.rank_in_group);
  send_object_bytes(*s.cpu_group, obj, dst);
}

Bytes GroupCoordinator::recv_object(int src) {
  Impl& s = *impl_;
  s.check_alive("recv_object");
  const comm::OpLabel label = s.label("recv_object");
  check_group_rank(label, "src", src, s.world_size);
  check_not_self(label, "src", src, s.rank_in_group);
  return recv_object_bytes(*s.cpu_group, src, comm::to_string(label));
}

std::shared_ptr<Work> GroupCoordinator::isend_object(Bytes obj, int dst) {
  Impl& s = *impl_;
  s.check_alive("isend_object");
  const comm::OpLabel label = s.label("isend_object");
  check_group_rank(label, "dst", dst, s.world_size);
  check_not_self(label, "dst", dst, s.rank_in_group);
  return isend_object_bytes(*s.cpu_group, std::move(obj), dst);
}

}  // namespace groupcoord
