#include "bootstrap/env_parse.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "groupcoord/check.h"

namespace groupcoord {
namespace bootstrap_detail {

int parse_non_negative_int(const std::string& text, const std::string& what) {
  GC_CHECK(!text.empty(), what, " is empty");
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  GC_CHECK(errno == 0 && end != nullptr && *end == '\0' && value >= 0 && value <= INT_MAX, what,
           " must be a non-negative integer, got '", text, "'");
  return static_cast<int>(value);
}

std::optional<int> env_int(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> text = env(name);
  if (!text || text->empty()) return std::nullopt;
  return parse_non_negative_int(*text, "environment variable " + name);
}

std::string env_str(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> text = env(name);
  return text ? *text : std::string();
}

}  // namespace bootstrap_detail
}  // namespace groupcoord
