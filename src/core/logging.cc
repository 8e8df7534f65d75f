// The leveled logger of logging.h. The level lives in one atomic so that GC_LOG's check is a
// single relaxed load; GROUPCOORD_LOG_LEVEL is read the first time the level is needed.
#include "groupcoord/logging.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>

#include "groupcoord/check.h"

namespace groupcoord {
namespace {

constexpr int kUnset = -1;
constexpr LogLevel kDefaultLevel = LogLevel::Warn;

std::atomic<int> g_level{kUnset};
std::atomic<int> g_rank{-1};

/// Writes all of `text` to stderr with as few write(2) calls as the kernel allows (one, for any
/// line shorter than a pipe buffer), so that lines from several processes do not interleave.
void write_stderr(const std::string& text) {
  const char* data = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report a broken stderr
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
}

/// The level named by GROUPCOORD_LOG_LEVEL, or the default (with a warning) if it is malformed.
LogLevel level_from_env() {
  const char* text = std::getenv("GROUPCOORD_LOG_LEVEL");
  if (text == nullptr || *text == '\0') return kDefaultLevel;
  try {
    return parse_log_level(text);
  } catch (const std::invalid_argument&) {
    // Logged directly: going through log_message would ask for the level again.
    write_stderr(std::string("[groupcoord W pid=") + std::to_string(::getpid()) +
                 "] GROUPCOORD_LOG_LEVEL='" + text +
                 "' is not one of trace, debug, info, warn, error, off; using warn\n");
    return kDefaultLevel;
  }
}

char level_letter(LogLevel level) {
  switch (level) {
    case LogLevel::Trace:
      return 'T';
    case LogLevel::Debug:
      return 'D';
    case LogLevel::Info:
      return 'I';
    case LogLevel::Warn:
      return 'W';
    case LogLevel::Error:
      return 'E';
    case LogLevel::Off:
      break;
  }
  return '?';
}

std::string trim_lower(const std::string& text) {
  const auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
  auto begin = std::find_if_not(text.begin(), text.end(), is_space);
  auto end = std::find_if_not(text.rbegin(), text.rend(), is_space).base();
  std::string out = begin < end ? std::string(begin, end) : std::string();
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

LogLevel parse_log_level(const std::string& text) {
  struct Name {
    const char* name;
    LogLevel level;
  };
  static constexpr Name kNames[] = {
      {"trace", LogLevel::Trace}, {"debug", LogLevel::Debug},  {"info", LogLevel::Info},
      {"warn", LogLevel::Warn},   {"warning", LogLevel::Warn}, {"error", LogLevel::Error},
      {"off", LogLevel::Off},     {"none", LogLevel::Off},
  };
  const std::string key = trim_lower(text);
  for (const Name& entry : kNames) {
    if (key == entry.name) return entry.level;
  }
  if (key.size() == 1 && key[0] >= '0' && key[0] <= '5') {
    return static_cast<LogLevel>(key[0] - '0');
  }
  GC_THROW(std::invalid_argument, "parse_log_level: unknown log level '", text,
           "' (expected trace, debug, info, warn, error, off or 0..5)");
}

LogLevel log_level() {
  int level = g_level.load(std::memory_order_relaxed);
  if (level != kUnset) return static_cast<LogLevel>(level);
  // First use: several threads may parse the variable; exactly one result wins, and a
  // set_log_level that ran first is never overwritten.
  int expected = kUnset;
  const int parsed = static_cast<int>(level_from_env());
  if (g_level.compare_exchange_strong(expected, parsed)) return static_cast<LogLevel>(parsed);
  return static_cast<LogLevel>(expected);
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

void set_log_rank(int rank) { g_rank.store(rank); }

void log_message(LogLevel level, const std::string& message) {
  if (level == LogLevel::Off || level < log_level()) return;
  std::string line = "[groupcoord ";
  line += level_letter(level);
  const int rank = g_rank.load(std::memory_order_relaxed);
  if (rank >= 0) line += " rank=" + std::to_string(rank);
  line += " pid=" + std::to_string(::getpid()) + "] " + message + "\n";
  write_stderr(line);
}

}  // namespace groupcoord
