// An EnvLookup over a map, so launcher detection is tested without touching the real environment.
#pragma once

#include <map>
#include <string>

#include "groupcoord/launcher_env.h"

namespace groupcoord {
namespace testing {

inline EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace testing
}  // namespace groupcoord
