#include "coordinator/coordinator_setup.h"

#include "groupcoord/group_coordinator.h"

#include <set>
#include <sstream>

#include "groupcoord/check.h"
#include "groupcoord/device_communicator.h"

namespace groupcoord {
namespace coordinator_detail {

namespace {

ProcessGroupOptions group_options(const std::string& name, std::chrono::milliseconds timeout) {
  ProcessGroupOptions options;
  options.name = name;
  options.timeout = timeout;
  return options;
}

}  // namespace

BackendInfo resolve_backend(const std::string& backend, const std::string& label) {
  register_builtin_device_communicators();
  const std::string name = backend.empty() ? default_backend() : backend;
  BackendInfo info = find_backend(name, label);
  GC_CHECK(has_device_communicator(info.communicator), label, ": backend '", name,
           "' needs the device communicator '", info.communicator, "', which is not registered",
           info.communicator == "cuda" ? " in this build (no CUDA support); use 'gloo'"
                                       : " (register_device_communicator)");
  GC_CHECK(info.device_type != DeviceType::CUDA || cuda_devices_visible(), label, ": backend '",
           name, "' is not available on this machine: no CUDA device is visible; use 'gloo'");
  return info;
}

void check_group_ranks(const std::vector<std::vector<int>>& group_ranks, int world_size,
                       const std::string& label) {
  GC_CHECK(!group_ranks.empty(), label, ": group_ranks is empty");
  std::set<int> seen;
  for (const auto& ranks : group_ranks) {
    GC_CHECK(!ranks.empty(), label, ": group_ranks ", group_ranks_str(group_ranks),
             " has an empty group");
    for (int r : ranks) {
      GC_CHECK(r >= 0 && r < world_size, label, ": rank ", r, " in group_ranks ",
               group_ranks_str(group_ranks), " is out of range for a world of ", world_size);
      GC_CHECK(seen.insert(r).second, label, ": rank ", r, " appears more than once in ",
               "group_ranks ", group_ranks_str(group_ranks));
    }
  }
}

std::string group_ranks_str(const std::vector<std::vector<int>>& group_ranks) {
  std::ostringstream out;
  out << "[";
  for (std::size_t g = 0; g < group_ranks.size(); ++g) {
    out << (g ? ", [" : "[");
    for (std::size_t i = 0; i < group_ranks[g].size(); ++i) {
      out << (i ? ", " : "") << group_ranks[g][i];
    }
    out << "]";
  }
  out << "]";
  return out.str();
}

CreatedGroups create_groups(ProcessGroup& world, const std::vector<std::vector<int>>& group_ranks,
                            bool with_device_group, const std::string& name,
                            std::chrono::milliseconds timeout) {
  CreatedGroups mine;
  for (const auto& ranks : group_ranks) {
    // Same order on every world rank (members or not), as new_group requires.
    std::shared_ptr<ProcessGroup> device;
    if (with_device_group)
      device = world.new_group(ranks, group_options(name + "/device", timeout));
    std::shared_ptr<ProcessGroup> cpu = world.new_group(ranks, group_options(name, timeout));
    if (cpu) {
      mine.cpu_group = std::move(cpu);
      mine.device_group = std::move(device);
      mine.ranks = ranks;
    }
  }
  return mine;
}

std::shared_ptr<ProcessGroup> create_sibling_groups(
    ProcessGroup& world, const std::vector<std::vector<int>>& group_ranks, const std::string& name,
    std::chrono::milliseconds timeout) {
  std::shared_ptr<ProcessGroup> mine;
  for (const auto& ranks : group_ranks) {
    auto group = world.new_group(ranks, group_options(name, timeout));
    if (group) mine = std::move(group);
  }
  return mine;
}

}  // namespace coordinator_detail
}  // namespace groupcoord
