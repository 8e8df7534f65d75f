// CpuCommunicator: construction, lifetime and the factory. The operations are in
// cpu_collectives.cc, cpu_point_to_point.cc and cpu_moe.cc.
#include "communicator/cpu_communicator.h"

#include <algorithm>

#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {

namespace {

// destroy() waits this long at most for in-flight transfers (as ProcessGroup::destroy does).
constexpr std::chrono::milliseconds kDrainLimit{10000};

// The group to run on: the device group when the backend is Gloo, else the CPU group.
std::shared_ptr<ProcessGroup> pick_group(const DeviceCommunicatorContext& context) {
  return context.device_group ? context.device_group : context.cpu_group;
}

std::string pick_name(const DeviceCommunicatorContext& context) {
  if (!context.unique_name.empty()) return context.unique_name;
  std::shared_ptr<ProcessGroup> group = pick_group(context);
  return group ? group->name() : std::string("cpu");
}

}  // namespace

std::unique_ptr<DeviceCommunicator> make_cpu_communicator(
    const DeviceCommunicatorContext& context) {
  return std::make_unique<CpuCommunicator>(context);
}

CpuCommunicator::CpuCommunicator(const DeviceCommunicatorContext& context)
    : name_(pick_name(context)), group_(pick_group(context)), use_all2all_(context.use_all2all) {
  GC_CHECK(group_ != nullptr, name_,
           " cpu communicator: the context has neither a device_group nor a cpu_group");
  GC_CHECK(context.device.is_cpu(), name_, " cpu communicator: device ", context.device.str(),
           " is not the CPU");
  // Token counts travel over cpu_group and tensors over device_group, indexed by rank: the two
  // must list the same processes in the same order.
  GC_CHECK(!context.cpu_group || context.cpu_group->world_ranks() == group_->world_ranks(), name_,
           " cpu communicator: cpu_group '", context.cpu_group ? context.cpu_group->name() : "",
           "' and device_group '", group_->name(),
           "' do not have the same ranks in the same order");
  rank_ = group_->rank();
  world_size_ = group_->size();
  if (use_all2all_) {
    // Token counts are metadata: they go over the CPU group, as in vLLM.
    std::shared_ptr<ProcessGroup> counts = context.cpu_group ? context.cpu_group : group_;
    all2all_ = std::make_unique<comm::NaiveAll2All>(*this, std::move(counts), name_);
  }
}

CpuCommunicator::~CpuCommunicator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    GC_LOG(Warn, name_, " cpu communicator: destroy failed: ", e.what());
  }
}

ProcessGroup& CpuCommunicator::group(const char* op) const {
  if (destroyed_.load()) {
    GC_THROW(DistributedError, name_, " ", op, ": the cpu communicator was destroyed");
  }
  return *group_;
}

void CpuCommunicator::destroy() {
  if (destroyed_.exchange(true)) return;
  in_flight_.drain(std::min(group_->timeout(), kDrainLimit), name_);
}

}  // namespace groupcoord
