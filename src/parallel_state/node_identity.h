// What "the same node" means for parallel_state: two processes run on the same node when they see
// the same kernel boot id (/proc/sys/kernel/random/boot_id, fresh at every boot and shared by
// every process, container or not, of one running kernel) and the same host name (which tells
// apart containers with private host names, whose /dev/shm is usually private too).
#pragma once

#include <string>
#include <vector>

#include "groupcoord/process_group.h"

namespace groupcoord {
namespace parallel_state_detail {

/// "<hostname>/<boot id>" of this process's node ("<hostname>/" when the boot id is unreadable,
/// e.g. off Linux).
std::string local_node_id();

/// Collective over `group`: every rank's `text`, in group rank order.
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text);

}  // namespace parallel_state_detail
}  // namespace groupcoord
