// The object protocol of GroupCoordinator over its Gloo CPU group: an object (Bytes; Python
// pickles) travels as its size (one int64) followed by its bytes, as in vLLM's send_object /
// broadcast_object.
//
// Point-to-point objects use their own tag on the CPU group, so they never match another stream
// between the same two ranks (the host tensors of the tensor-dict protocol use a second tag);
// within a tag, messages match in the order they were posted on both sides.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "groupcoord/bytes.h"
#include "groupcoord/process_group.h"
#include "groupcoord/work.h"

namespace groupcoord {
namespace coordinator_detail {

/// Tag of the object stream (sizes and payloads) on a coordinator's CPU group ("obj\1").
inline constexpr std::uint32_t kObjectTag = 0x016A626F;
/// Tag of the host tensors sent by the tensor-dict protocol on the CPU group ("td\0\1").
inline constexpr std::uint32_t kTensorDictTag = 0x01006474;

/// Blocking send of `obj` to group rank `dst` (size, then bytes).
void send_object_bytes(ProcessGroup& group, const Bytes& obj, int dst);

/// Blocking receive of one object from group rank `src`. `label` ("tp:0 recv_object") names the
/// call in errors; a negative size from the peer is a DistributedError.
Bytes recv_object_bytes(ProcessGroup& group, int src, const std::string& label);

/// Non-blocking send_object_bytes. The returned Work owns copies of the size and the bytes.
std::shared_ptr<Work> isend_object_bytes(ProcessGroup& group, Bytes obj, int dst);

/// Collective over `group`: `obj` (required on `src`) on every rank. Two broadcasts: the size,
/// then the bytes (skipped when empty, which every rank knows from the size).
Bytes broadcast_object_bytes(ProcessGroup& group, const std::optional<Bytes>& obj, int src);

/// Packs a list of objects into one (count, sizes, concatenated bytes) ...
Bytes pack_object_list(const std::vector<Bytes>& objects);
/// ... and back. Throws DistributedError naming `label` for malformed input.
std::vector<Bytes> unpack_object_list(const Bytes& packed, const std::string& label);

}  // namespace coordinator_detail
}  // namespace groupcoord
