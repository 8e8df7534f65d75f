// The object protocol of GroupCoordinator over its Gloo CPU group: an object (Bytes; Python
// pickles) travels as its size (one int64) followed by its bytes, as in vLLM's send_object /
// broadcast_object.
//
// A source that cannot produce its object (its serializer threw) sends a failure instead: the
// size word -1 - n followed by n bytes of text saying why. Receivers consume it as they would the
// object, so the group stays in step, and throw SourceFailedError carrying the text at once
// rather than waiting for their deadline.
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

#include "communicator/op_label.h"
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
/// call in errors: SourceFailedError when the peer sent a failure, DistributedError for a malformed
/// size.
Bytes recv_object_bytes(ProcessGroup& group, int src, const comm::OpLabel& label);

/// Non-blocking send_object_bytes. The returned Work owns copies of the size and the bytes.
std::shared_ptr<Work> isend_object_bytes(ProcessGroup& group, Bytes obj, int dst);
/// Non-blocking send of a failure saying `why` where group rank `dst` expects an object.
std::shared_ptr<Work> isend_object_failure(ProcessGroup& group, const std::string& why, int dst);

/// Collective over `group`: `obj` (non-null exactly on `src`) to every rank. Two broadcasts: the
/// size, then the bytes (skipped when empty, which every rank knows from the size), sent straight
/// from `*obj` (a broadcast only reads its root's buffer). Returns the bytes on the receivers and
/// nullopt on `src`, whose caller has them. `label` names the call in errors: SourceFailedError on
/// the receivers when the source sent a failure.
std::optional<Bytes> broadcast_object_bytes(ProcessGroup& group, const Bytes* obj, int src,
                                            const comm::OpLabel& label);
/// The source's side of broadcast_object_bytes when it has no object: a failure saying `why`.
void broadcast_object_failure(ProcessGroup& group, const std::string& why, int src);

/// A failure's text is cut to this many bytes (at a UTF-8 character boundary) before it is sent;
/// a longer one announced by a peer means a corrupt stream.
inline constexpr std::size_t kMaxFailureTextBytes = std::size_t{1} << 16;
/// `why` cut to kMaxFailureTextBytes.
std::string cut_failure_text(const std::string& why);
/// Throws SourceFailedError: `label`'s source `src` sent the failure `why`.
[[noreturn]] void throw_source_failure(const comm::OpLabel& label, int src, const std::string& why);

/// Packs a list of objects into one (count, sizes, concatenated bytes) ...
Bytes pack_object_list(const std::vector<Bytes>& objects);
/// ... and back. Throws DistributedError naming `label` for malformed input.
std::vector<Bytes> unpack_object_list(const Bytes& packed, const std::string& label);

}  // namespace coordinator_detail
}  // namespace groupcoord
