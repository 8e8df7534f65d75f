// How every layer names an operation in its error messages: "<group> <op>", e.g.
// "tp:0 all_gather: dim 3 is out of range for a 3-d tensor" (docs/architecture.md). The checks
// that write those messages are in op_checks.h.
#pragma once

#include <ostream>
#include <string>

namespace groupcoord {
namespace comm {

/// The group (the coordinator's unique name) and the operation an error message is about.
struct OpLabel {
  const std::string& group;
  const char* op;
};

/// Streams "<group> <op>".
std::ostream& operator<<(std::ostream& out, const OpLabel& label);
/// "<group> <op>" as a string, for code that keeps or passes the text on.
std::string to_string(const OpLabel& label);

}  // namespace comm
}  // namespace groupcoord
