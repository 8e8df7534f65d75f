#include "communicator/op_label.h"

#include "groupcoord/check.h"

namespace groupcoord {
namespace comm {

std::ostream& operator<<(std::ostream& out, const OpLabel& label) {
  return out << label.group << " " << label.op;
}

std::string to_string(const OpLabel& label) { return label.group + " " + label.op; }

void check_tensor_on(const OpLabel& where, const Tensor& tensor, const char* what, Device device) {
  GC_CHECK(tensor.defined(), where, ": ", what, " is an undefined tensor");
  if (device.is_cpu()) {
    GC_CHECK(tensor.device().is_cpu(), where, ": ", what,
             " must be a CPU tensor for the cpu communicator, got ", tensor.str());
  } else {
    GC_CHECK(tensor.device() == device, where, ": ", what, " must be a CUDA tensor on ",
             device.str(), " (the communicator's device), got ", tensor.str());
  }
}

void check_cpu_tensor(const OpLabel& where, const Tensor& tensor, const char* what) {
  check_tensor_on(where, tensor, what, Device::cpu());
}

void check_peer_rank(const OpLabel& where, int peer, const char* what, int rank, int world_size,
                     bool allow_self) {
  GC_CHECK(peer >= 0 && peer < world_size, where, ": ", what, " ", peer,
           " is out of range for a group of ", world_size, " rank(s)");
  // A transfer to oneself would wait for a matching call that never comes.
  GC_CHECK(allow_self || peer != rank, where, ": ", what, " ", peer, " is this rank itself (rank ",
           rank, " of ", world_size, ")");
}

}  // namespace comm
}  // namespace groupcoord
