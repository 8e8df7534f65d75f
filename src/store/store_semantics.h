// Operation semantics shared by every Store implementation (private to src/store), so that
// HashStore, the TCP server and FileStore agree on add, compare_set and argument checks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "groupcoord/bytes.h"

namespace groupcoord {
namespace store_internal {

/// Throws std::invalid_argument when `key` is empty. `store` and `op` name the call.
void check_key(const char* store, const char* op, const std::string& key);
/// Throws std::invalid_argument when `timeout` is negative.
void check_timeout(const char* store, const char* op, std::chrono::milliseconds timeout);

/// add(): the new counter value for `current` (nullptr = missing, counts as 0) plus `delta`.
/// Throws std::invalid_argument when the stored value is not a decimal integer or on overflow.
std::int64_t add_to_counter(const std::string& key, const Bytes* current, std::int64_t delta);
/// The decimal text a counter is stored as (c10d compatible: get() of a counter reads "3").
std::string counter_text(std::int64_t value);

/// What compare_set decided: whether to store `desired`, and the value to return.
struct CompareSetOutcome {
  bool store = false;
  Bytes result;
};
/// c10d semantics: a missing key with an empty `expected`, or a current value equal to
/// `expected`, takes `desired`; otherwise nothing changes and the current value (or `expected`
/// for a missing key) is returned. `current` is nullptr when the key is missing.
CompareSetOutcome decide_compare_set(const Bytes* current, const Bytes& expected,
                                     const Bytes& desired);

/// "[a, b, c]" for messages; long lists and long keys are shortened.
std::string format_keys(const std::vector<std::string>& keys);

}  // namespace store_internal
}  // namespace groupcoord
