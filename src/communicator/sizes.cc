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
