// On/off settings read from the environment: switches that are on by default (GROUPCOORD_CPU_SHM,
// GROUPCOORD_WAIT_PACING, ...) and flags that are off by default (GROUPCOORD_USE_NCCL_SYMM_MEM,
// ...). One spelling rule for all of them, so that `=false` never leaves a switch on.
#pragma once

namespace groupcoord {

/// The setting `name`: `fallback` when unset or empty; false for 0, false, off, no; true for 1,
/// true, on, yes (any case). Any other value throws std::invalid_argument naming the variable,
/// the value and the accepted spellings.
bool env_bool(const char* name, bool fallback);

/// A switch that is on by default: env_bool(name, true).
inline bool env_switch_on(const char* name) { return env_bool(name, true); }

}  // namespace groupcoord
