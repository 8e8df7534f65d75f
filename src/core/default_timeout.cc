#include "groupcoord/default_timeout.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "groupcoord/check.h"

namespace groupcoord {

namespace {

std::chrono::milliseconds read_default_timeout() {
  const char* value = std::getenv("GROUPCOORD_TIMEOUT_S");
  if (value == nullptr || *value == '\0') return kBuiltinTimeout;
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  GC_CHECK(end != value && *end == '\0' && std::isfinite(seconds) && seconds > 0,
           "GROUPCOORD_TIMEOUT_S=", value, " is not a positive number of seconds");
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000)));
}

}  // namespace

std::chrono::milliseconds default_timeout() {
  static const std::chrono::milliseconds timeout = read_default_timeout();
  return timeout;
}

}  // namespace groupcoord
