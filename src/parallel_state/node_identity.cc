#include "parallel_state/node_identity.h"

#include <unistd.h>

#include <climits>
#include <cstdint>
#include <fstream>

#include "groupcoord/dtype.h"

namespace groupcoord {
namespace parallel_state_detail {

namespace {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

std::string boot_id() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(file, id);
  return id;
}

}  // namespace

std::string local_node_id() { return host_name() + "/" + boot_id(); }

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text) {
  // Lengths first, so that the bytes can travel in one all_gatherv.
  const int size = group.size();
  std::int64_t length = static_cast<std::int64_t>(text.size());
  std::vector<std::int64_t> lengths(size);
  group.all_gather(&length, lengths.data(), 1, DType::Int64);

  std::vector<std::size_t> counts(lengths.begin(), lengths.end());
  std::size_t total = 0;
  for (std::size_t count : counts) total += count;
  std::string joined(total, '\0');
  group.all_gatherv(text.data(), joined.data(), counts, DType::UInt8);

  std::vector<std::string> texts;
  std::size_t offset = 0;
  for (std::size_t count : counts) {
    texts.push_back(joined.substr(offset, count));
    offset += count;
  }
  return texts;
}

}  // namespace parallel_state_detail
}  // namespace groupcoord
