// env_bool (core/env_switch.h).
#include "core/env_switch.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "groupcoord/check.h"

namespace groupcoord {

bool env_bool(const char* name, bool fallback) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || raw[0] == '\0') return fallback;
  std::string value = raw;
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (value == "0" || value == "false" || value == "off" || value == "no") return false;
  if (value == "1" || value == "true" || value == "on" || value == "yes") return true;
  GC_THROW(std::invalid_argument, name, "='", raw,
           "' is not an on/off value: use 1, true, on, yes or 0, false, off, no");
}

}  // namespace groupcoord
