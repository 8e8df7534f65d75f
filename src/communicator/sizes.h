// Checks of the per-rank `sizes` of the v-variants (all_gatherv, reduce_scatterv) and of the
// token counts that dispatch/combine record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "communicator/op_label.h"

namespace groupcoord {
namespace comm {

/// Throws std::invalid_argument unless `sizes` has `world_size` entries, all non-negative.
void check_sizes_shape(const OpLabel& where, const std::vector<std::int64_t>& sizes,
                       int world_size);

/// Throws std::invalid_argument unless sizes[rank] equals `local_size`, the size of this rank's
/// input along the gathered dim.
void check_own_size(const OpLabel& where, const std::vector<std::int64_t>& sizes, int rank,
                    std::int64_t local_size);

/// Throws std::invalid_argument unless `sizes` sums to `dim_size`.
void check_sizes_sum(const OpLabel& where, const std::vector<std::int64_t>& sizes,
                     std::int64_t dim_size);

/// True when every entry equals the first (an empty list is uniform). Uniform sizes take the
/// plain all_gather / reduce_scatter path, exactly as no sizes do.
bool sizes_are_uniform(const std::vector<std::int64_t>& sizes);

/// "[81, 20, 57]": a list of sizes as error messages show it.
std::string sizes_str(const std::vector<std::int64_t>& sizes);

/// Sum of sizes[0 .. rank): where rank `rank`'s slice starts.
std::int64_t offset_of_rank(const std::vector<std::int64_t>& sizes, int rank);

}  // namespace comm
}  // namespace groupcoord
