#include "communicator/sizes.h"

#include <numeric>
#include <sstream>

#include "groupcoord/check.h"

namespace groupcoord {
namespace comm {

std::string sizes_str(const std::vector<std::int64_t>& sizes) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

void check_sizes_shape(const OpLabel& where, const std::vector<std::int64_t>& sizes,
                       int world_size) {
  GC_CHECK(static_cast<int>(sizes.size()) == world_size, where, ": sizes ", sizes_str(sizes),
           " has ", sizes.size(), " entries, expected one per rank (", world_size, ")");
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    GC_CHECK(sizes[r] >= 0, where, ": sizes ", sizes_str(sizes), " has a negative entry ", sizes[r],
             " for rank ", r);
  }
}

void check_own_size(const OpLabel& where, const std::vector<std::int64_t>& sizes, int rank,
                    std::int64_t local_size) {
  GC_CHECK(sizes[rank] == local_size, where, ": sizes[", rank, "] is ", sizes[rank],
           " but this rank's input has size ", local_size, " along the gathered dim (sizes ",
           sizes_str(sizes), ")");
}

void check_sizes_sum(const OpLabel& where, const std::vector<std::int64_t>& sizes,
                     std::int64_t dim_size) {
  const std::int64_t sum = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
  GC_CHECK(sum == dim_size, where, ": sizes ", sizes_str(sizes), " sum to ", sum,
           " but the input has size ", dim_size, " along the scattered dim");
}

bool sizes_are_uniform(const std::vector<std::int64_t>& sizes) {
  for (std::int64_t size : sizes) {
    if (size != sizes.front()) return false;
  }
  return true;
}

std::int64_t offset_of_rank(const std::vector<std::int64_t>& sizes, int rank) {
  return std::accumulate(sizes.begin(), sizes.begin() + rank, std::int64_t{0});
}

}  // namespace comm
}  // namespace groupcoord
