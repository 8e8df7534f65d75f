#include "communicator/op_label.h"

#include "groupcoord/check.h"

namespace groupcoord {
namespace comm {

std::ostream& operator<<(std::ostream& out, const OpLabel& label) {
  return out << label.group << " " << label.op;
}

std::string to_string(const OpLabel& label) { return label.group + " " + label.op; }

}  // namespace comm
}  // namespace groupcoord
