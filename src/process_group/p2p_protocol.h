// Wire protocol of point-to-point transfers.
//
// Gloo's TCP transport requires a receive to be posted with at least the size the sender sends;
// a larger message makes Gloo's event loop throw, which terminates the receiving process. A
// mismatch must instead surface as an error, so every transfer is two messages:
//
//   header  (fixed 16 bytes, slot header_slot(tag)):  magic, tag, payload size
//   payload (the bytes, slot payload_slot(tag)):      only when the size is not zero
//
// The receiver posts the header receive at once and the payload receive only after the header
// has told it the size (into a scratch buffer when it differs from what the caller expected, so
// the stream stays in step and the caller gets a DistributedError). Headers and payloads travel
// on separate slots; within a slot Gloo matches in posting order, and a RecvStream makes the
// payload receives of one (source, tag) stream get posted in the same order as their headers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace groupcoord {

/// Gloo's collectives build slots as (prefix << 56 | tag << 24 | step) with prefixes 0x01..0x08
/// (gloo/types.h); point-to-point traffic uses a prefix none of them uses, so a user tag can never
/// match a collective's message.
inline constexpr std::uint64_t kPointToPointSlotPrefix = 0x80;

/// Slot of the headers of stream `tag`.
inline std::uint64_t header_slot(std::uint32_t tag) {
  return (kPointToPointSlotPrefix << 56) | (static_cast<std::uint64_t>(tag) << 24);
}
/// Slot of the payloads of stream `tag`.
inline std::uint64_t payload_slot(std::uint32_t tag) { return header_slot(tag) + 1; }

/// The fixed-size message that precedes every payload.
struct P2PHeader {
  static constexpr std::uint32_t kMagic = 0x32504347;  ///< "GCP2" in little-endian bytes
  std::uint32_t magic = kMagic;
  std::uint32_t tag = 0;
  std::uint64_t nbytes = 0;
};
static_assert(sizeof(P2PHeader) == 16, "the header is a fixed 16-byte message");

/// Ordering state of one (source, tag) receive stream: receives take turns, in the order they
/// were posted, to post their payload receive.
struct RecvStream {
  std::mutex mutex;
  std::condition_variable turn_changed;
  std::uint64_t next_ticket = 0;  ///< handed to receives as they are posted
  std::uint64_t turn = 0;         ///< ticket whose payload receive may be posted now
  bool poisoned = false;          ///< a receive failed before posting its payload
  std::string poison_reason;
};

}  // namespace groupcoord
