// Device names for messages.
#include "groupcoord/device.h"

namespace groupcoord {

std::string Device::str() const {
  if (type == DeviceType::CPU) return "cpu";
  return "cuda:" + std::to_string(index);
}

}  // namespace groupcoord
