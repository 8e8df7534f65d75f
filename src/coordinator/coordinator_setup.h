// Construction steps of GroupCoordinator: backend resolution, validation of group_ranks, and the
// collective creation of the Gloo groups (vLLM's loop over group_ranks calling new_group).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/process_group.h"

#include "groupcoord/device.h"
#include "groupcoord/device_communicator.h"

namespace groupcoord {
namespace coordinator_detail {

/// The backend table's entry for `backend` ("" is default_backend()), after registering the
/// built-ins. std::invalid_argument naming `label` for a name not in the table, for a backend
/// whose device communicator is not registered (nccl in a build without CUDA), and for a CUDA
/// backend on a machine without a visible CUDA device.
BackendInfo resolve_backend(const std::string& backend, const std::string& label);

/// True when this build has CUDA and the process sees a CUDA device (builtin_communicators.cc).
bool cuda_devices_visible();

/// The CUDA device a rank with `local_rank` uses: local_rank modulo the visible devices
/// (implemented in builtin_communicators.cc, next to the CUDA registration).
Device cuda_device_for(int local_rank);

/// Prepares the device layer a backend's tensors need (CUDA allocator and copies for CUDA);
/// idempotent.
void init_device_layer(DeviceType device_type);

/// Every list non-empty, every rank in [0, world_size), no rank listed twice (in one list or
/// across lists). Depends only on values every rank passes identically, so a failure is raised
/// on every rank before any collective starts.
void check_group_ranks(const std::vector<std::vector<int>>& group_ranks, int world_size,
                       const std::string& label);

/// "[[0, 1], [2, 3]]".
std::string group_ranks_str(const std::vector<std::vector<int>>& group_ranks);

/// This rank's groups out of the collective creation.
struct CreatedGroups {
  std::shared_ptr<ProcessGroup> cpu_group;     ///< null when this rank is in no list
  std::shared_ptr<ProcessGroup> device_group;  ///< null unless requested and a member
  std::vector<int> ranks;                      ///< the list containing this rank
};

/// Collective over every rank of `world`: for each list, a device group (when
/// `with_device_group`: the gloo backend) and a CPU group, both named `name`, with `timeout`.
CreatedGroups create_groups(ProcessGroup& world, const std::vector<std::vector<int>>& group_ranks,
                            bool with_device_group, const std::string& name,
                            std::chrono::milliseconds timeout);

/// Collective over every rank of `world`: one more Gloo group per list (a sibling device group);
/// returns this rank's, or null.
std::shared_ptr<ProcessGroup> create_sibling_groups(
    ProcessGroup& world, const std::vector<std::vector<int>>& group_ranks, const std::string& name,
    std::chrono::milliseconds timeout);

}  // namespace coordinator_detail
}  // namespace groupcoord
