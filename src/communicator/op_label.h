// How the communicator layer names an operation in its error messages: "<group> <op>", e.g.
// "tp:0 all_gather: dim 3 is out of range for a 3-d tensor" (docs/architecture.md), plus the
// argument checks every operation shares.
#pragma once

#include <ostream>
#include <string>

#include "groupcoord/tensor.h"

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

/// Throws std::invalid_argument unless `tensor` is defined and lives on `device`, the device of the
/// communicator running the op. `what` names the argument ("input", "hidden_states", ...).
void check_tensor_on(const OpLabel& where, const Tensor& tensor, const char* what, Device device);
/// check_tensor_on the CPU.
void check_cpu_tensor(const OpLabel& where, const Tensor& tensor, const char* what);

/// Throws std::invalid_argument unless 0 <= peer < world_size and, when !allow_self, peer != rank.
/// `what` names the argument ("dst", "src").
void check_peer_rank(const OpLabel& where, int peer, const char* what, int rank, int world_size,
                     bool allow_self);

}  // namespace comm
}  // namespace groupcoord
