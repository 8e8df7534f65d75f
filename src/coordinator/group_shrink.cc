#include "coordinator/group_shrink.h"

#include <algorithm>

#include "core/shape.h"
#include "groupcoord/check.h"

namespace groupcoord {
namespace coordinator_detail {

WorldShrink world_shrink_to_follow(int epoch, const std::vector<int>& excluded_world_ranks,
                                   const std::string& label) {
  const std::vector<WorldShrink> done = world_shrinks();
  if (static_cast<int>(done.size()) <= epoch) return shrink_world(excluded_world_ranks);
  // Another coordinator of this process shrank the world first: this one follows that shrink.
  const WorldShrink& next = done[epoch];
  std::vector<int> asked = excluded_world_ranks;
  std::sort(asked.begin(), asked.end());
  GC_CHECK(asked == next.excluded, label, ": shrink: excluding world ranks ",
           detail::ranks_str(asked), ", but the world's shrink #", next.epoch,
           ", which this group has not followed yet, excluded ", detail::ranks_str(next.excluded),
           "; shrink every group with the same ranks, one shrink at a time");
  return next;
}

std::vector<std::vector<int>> renumber_group_ranks(const std::vector<std::vector<int>>& group_ranks,
                                                   const WorldShrink& shrink) {
  std::vector<std::vector<int>> renumbered;
  for (const std::vector<int>& ranks : group_ranks) {
    std::vector<int> survivors;
    for (int r : ranks) {
      if (shrink.new_rank_of[r] >= 0) survivors.push_back(shrink.new_rank_of[r]);
    }
    if (!survivors.empty()) renumbered.push_back(std::move(survivors));
  }
  return renumbered;
}

}  // namespace coordinator_detail
}  // namespace groupcoord
