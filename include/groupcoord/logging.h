// A small leveled logger. The level comes from GROUPCOORD_LOG_LEVEL (trace, debug, info, warn,
// error, off; default warn) read once, or from set_log_level(). Lines go to stderr prefixed with
// the level, the process id and, once known, the world rank:
//   [groupcoord W rank=1 pid=4242] store: connect to 127.0.0.1:29500 failed, retrying
#pragma once

#include <sstream>
#include <string>

namespace groupcoord {

/// Severity of a log line; lines below the current level are dropped before formatting.
enum class LogLevel { Trace = 0, Debug = 1, Info = 2, Warn = 3, Error = 4, Off = 5 };

/// The current level (GROUPCOORD_LOG_LEVEL at first use, unless set_log_level was called).
LogLevel log_level();
/// Overrides the level for this process.
void set_log_level(LogLevel level);
/// Parses "trace".."off" (case-insensitive) or "0".."5"; throws std::invalid_argument otherwise.
LogLevel parse_log_level(const std::string& text);
/// Sets the world rank shown in log lines (-1 hides it). Called by the bootstrap.
void set_log_rank(int rank);
/// Writes one line at `level` (thread-safe; one write(2) per line so ranks do not interleave).
void log_message(LogLevel level, const std::string& message);

namespace detail {
template <typename... Parts>
void log_parts(LogLevel level, const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  log_message(level, out.str());
}
}  // namespace detail

}  // namespace groupcoord

/// GC_LOG(Info, "store: listening on ", port);  Arguments are only evaluated when enabled.
#define GC_LOG(level, ...)                                                         \
  do {                                                                             \
    if (::groupcoord::LogLevel::level >= ::groupcoord::log_level()) {              \
      ::groupcoord::detail::log_parts(::groupcoord::LogLevel::level, __VA_ARGS__); \
    }                                                                              \
  } while (0)
