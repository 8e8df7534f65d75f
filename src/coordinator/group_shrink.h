// The bookkeeping of GroupCoordinator::shrink: which world shrink a coordinator follows, and the
// renumbering of its rank lists after it.
#pragma once

#include <string>
#include <vector>

#include "groupcoord/world.h"

namespace groupcoord {
namespace coordinator_detail {

/// The world shrink a coordinator at `epoch` (world shrinks it has followed) follows when asked to
/// exclude `excluded_world_ranks`: the next recorded one, which must exclude exactly those ranks
/// (else std::invalid_argument naming `label`), or, when it is the first to ask, a new shrink of
/// the world (shrink_world).
WorldShrink world_shrink_to_follow(int epoch, const std::vector<int>& excluded_world_ranks,
                                   const std::string& label);

/// `group_ranks` (world ranks before `shrink`) without the excluded ranks, in the new numbering;
/// lists left empty are dropped.
std::vector<std::vector<int>> renumber_group_ranks(const std::vector<std::vector<int>>& group_ranks,
                                                   const WorldShrink& shrink);

}  // namespace coordinator_detail
}  // namespace groupcoord
