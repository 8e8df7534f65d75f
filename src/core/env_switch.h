// On/off switches read from the environment (GROUPCOORD_CPU_SHM, GROUPCOORD_WAIT_PACING, ...).
#pragma once

#include <cstdlib>
#include <cstring>

namespace groupcoord {

/// True unless the variable `name` is set to "0": features behind such a switch are on by default.
inline bool env_switch_on(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr || std::strcmp(value, "0") != 0;
}

}  // namespace groupcoord
