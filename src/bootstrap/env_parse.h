// Small helpers to read integers out of environment variables with clear errors.
#pragma once

#include <optional>
#include <string>

#include "groupcoord/launcher_env.h"

namespace groupcoord {
namespace bootstrap_detail {

/// The integer value of `name`, std::nullopt when unset or empty. Throws std::invalid_argument
/// naming the variable when the text is not a non-negative integer.
std::optional<int> env_int(const EnvLookup& env, const std::string& name);

/// The value of `name`, or "" when unset.
std::string env_str(const EnvLookup& env, const std::string& name);

/// Parses a decimal non-negative int; throws std::invalid_argument mentioning `what`.
int parse_non_negative_int(const std::string& text, const std::string& what);

}  // namespace bootstrap_detail
}  // namespace groupcoord
