// Check macros that throw with file:line (docs/architecture.md). Engine-side extensions may use
// them too.
//
//   GC_CHECK(cond, "op ", name, ": bad dim ", dim);  -> std::invalid_argument (the caller's fault)
//   GC_ASSERT(cond, ...);                            -> std::logic_error (an invariant of ours
//   broke) GC_THROW(TimeoutError, "waited ", ms, " ms");    -> the named error type,
//   unconditionally
//
// Message parts are streamed with operator<<, so call sites can name the group, op and value
// without building strings by hand. Each macro is a single `do { } while (0)` statement.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "groupcoord/errors.h"

namespace groupcoord {
namespace detail {

/// Concatenates the message parts with operator<<.
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

/// Throws E("file:line: [check failed: cond: ]message"). Out of line of the hot path.
template <typename E, typename... Parts>
[[noreturn]] void throw_error(const char* file, int line, const char* condition,
                              const Parts&... parts) {
  std::ostringstream out;
  out << file << ":" << line << ": ";
  if (condition != nullptr) out << "check failed (" << condition << "): ";
  (out << ... << parts);
  throw E(out.str());
}

}  // namespace detail
}  // namespace groupcoord

/// Throws ErrorType with file:line and the streamed message parts.
#define GC_THROW(ErrorType, ...) \
  ::groupcoord::detail::throw_error<ErrorType>(__FILE__, __LINE__, nullptr, __VA_ARGS__)

/// Argument check: throws std::invalid_argument when `cond` is false.
#define GC_CHECK(cond, ...)                                                               \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      ::groupcoord::detail::throw_error<std::invalid_argument>(__FILE__, __LINE__, #cond, \
                                                               __VA_ARGS__);              \
    }                                                                                     \
  } while (0)

/// Internal invariant: throws std::logic_error when `cond` is false.
#define GC_ASSERT(cond, ...)                                                                       \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      ::groupcoord::detail::throw_error<std::logic_error>(__FILE__, __LINE__, #cond, __VA_ARGS__); \
    }                                                                                              \
  } while (0)
