// Operation semantics shared by every Store implementation (see store_semantics.h).
#include "store/store_semantics.h"

#include <charconv>
#include <stdexcept>

#include "groupcoord/check.h"

namespace groupcoord {
namespace store_internal {
namespace {

constexpr std::size_t kMaxKeysInMessage = 16;
constexpr std::size_t kMaxKeyCharsInMessage = 200;

}  // namespace

void check_key(const char* store, const char* op, const std::string& key) {
  GC_CHECK(!key.empty(), store, ": ", op, ": the key must not be empty");
}

void check_timeout(const char* store, const char* op, std::chrono::milliseconds timeout) {
  GC_CHECK(timeout.count() >= 0, store, ": ", op, ": timeout must not be negative, got ",
           timeout.count(), " ms");
}

std::int64_t add_to_counter(const std::string& key, const Bytes* current, std::int64_t delta) {
  std::int64_t value = 0;
  if (current != nullptr) {
    const char* begin = current->data();
    const char* end = begin + current->size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    GC_CHECK(ec == std::errc() && ptr == end && !current->empty(), "store: add: key '", key,
             "' holds a value that is not a decimal integer (", current->size(), " bytes)");
  }
  std::int64_t result = 0;
  GC_CHECK(!__builtin_add_overflow(value, delta, &result), "store: add: key '", key, "': ", value,
           " + ", delta, " overflows int64");
  return result;
}

std::string counter_text(std::int64_t value) { return std::to_string(value); }

CompareSetOutcome decide_compare_set(const Bytes* current, const Bytes& expected,
                                     const Bytes& desired) {
  if (current == nullptr) {
    if (expected.empty()) return {true, desired};
    return {false, expected};
  }
  if (*current == expected) return {true, desired};
  return {false, *current};
}

std::string format_keys(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (std::size_t i = 0; i < keys.size() && i < kMaxKeysInMessage; ++i) {
    if (i > 0) out += ", ";
    out += "'";
    out += keys[i].size() <= kMaxKeyCharsInMessage
               ? keys[i]
               : keys[i].substr(0, kMaxKeyCharsInMessage) + "...";
    out += "'";
  }
  if (keys.size() > kMaxKeysInMessage) {
    out += ", ... (" + std::to_string(keys.size() - kMaxKeysInMessage) + " more)";
  }
  return out + "]";
}

}  // namespace store_internal
}  // namespace groupcoord
