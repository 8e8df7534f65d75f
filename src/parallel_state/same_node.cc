// in_the_same_node_as and get_node_count(group): vLLM probes shared memory; here each rank
// publishes its node id (node_identity.h says what that is) over the Gloo group and compares.
#include <set>
#include <string>
#include <vector>

#include "groupcoord/check.h"
#include "groupcoord/parallel_state.h"
#include "parallel_state/node_identity.h"

namespace groupcoord {

std::vector<bool> in_the_same_node_as(ProcessGroup& group, int source_rank) {
  // Every rank passes the same source_rank, so every rank rejects a bad one before sending.
  GC_CHECK(source_rank >= 0 && source_rank < group.size(), "in_the_same_node_as on group '",
           group.name(), "': source_rank ", source_rank, " is out of range for a group of ",
           group.size(), " ranks");
  const std::vector<std::string> ids =
      parallel_state_detail::all_gather_strings(group, parallel_state_detail::local_node_id());
  std::vector<bool> same(ids.size());
  for (std::size_t r = 0; r < ids.size(); ++r) same[r] = ids[r] == ids[source_rank];
  return same;
}

int get_node_count(ProcessGroup& group) {
  const std::vector<std::string> ids =
      parallel_state_detail::all_gather_strings(group, parallel_state_detail::local_node_id());
  return static_cast<int>(std::set<std::string>(ids.begin(), ids.end()).size());
}

}  // namespace groupcoord
