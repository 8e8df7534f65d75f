// The per-rank `sizes` of the v-variants (all_gatherv, reduce_scatterv) and the token counts
// that dispatch/combine record (their checks are in op_checks.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "communicator/op_label.h"

namespace groupcoord {
namespace comm {

/// True when every entry equals the first (an empty list is uniform). Uniform sizes take the
/// plain all_gather / reduce_scatter path, exactly as no sizes do.
bool sizes_are_uniform(const std::vector<std::int64_t>& sizes);

/// "[81, 20, 57]": a list of sizes as error messages show it.
std::string sizes_str(const std::vector<std::int64_t>& sizes);

/// Sum of sizes[0 .. rank): where rank `rank`'s slice starts.
std::int64_t offset_of_rank(const std::vector<std::int64_t>& sizes, int rank);

}  // namespace comm
}  // namespace groupcoord
