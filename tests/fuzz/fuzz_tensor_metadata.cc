// libFuzzer target: the tensor-dict metadata decoder (coordinator/tensor_metadata.h), which reads
// what a peer sent. Properties: malformed input is a DistributedError and nothing else (no crash,
// no other exception, no sanitizer report, no allocation driven by an unchecked length), and what
// decodes re-encodes to a list that decodes to the same entries.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/tensor_metadata.h"
#include "groupcoord/errors.h"

namespace {

using groupcoord::coordinator_detail::MetadataEntry;

bool same(const std::vector<MetadataEntry>& a, const std::vector<MetadataEntry>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].key != b[i].key || a[i].kind != b[i].kind) return false;
    if (a[i].kind == MetadataEntry::Kind::Bytes) {
      if (a[i].value != b[i].value) return false;
    } else if (a[i].dtype != b[i].dtype || a[i].shape != b[i].shape ||
               a[i].device_type != b[i].device_type) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const groupcoord::Bytes encoded(reinterpret_cast<const char*>(data), size);
  std::vector<MetadataEntry> decoded;
  try {
    decoded = groupcoord::coordinator_detail::decode_metadata(encoded, "fuzz");
  } catch (const groupcoord::DistributedError&) {
    return 0;  // the promised answer to a malformed list
  }
  const groupcoord::Bytes again = groupcoord::coordinator_detail::encode_metadata(decoded);
  if (!same(groupcoord::coordinator_detail::decode_metadata(again, "fuzz"), decoded)) {
    __builtin_trap();
  }
  return 0;
}
