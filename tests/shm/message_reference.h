// Reference messages for the MessageQueue tests: pure functions of (stream, index), so every
// rank recomputes what the writer sent without looking at the code under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace groupcoord {
namespace testing {

/// Size of message `index` of a stream of random sizes in [0, max_bytes]; every 17th is empty
/// and a few sit exactly on chunk boundaries (payload = chunk - 16) to catch off-by-ones.
std::size_t reference_size(std::uint64_t stream, std::size_t index, std::size_t max_bytes,
                           std::size_t chunk_bytes);
/// `size` bytes determined by (stream, index): a splitmix64 sequence, so that any shifted,
/// truncated or stale chunk shows up as a mismatch.
std::string reference_message(std::uint64_t stream, std::size_t index, std::size_t size);

}  // namespace testing
}  // namespace groupcoord
