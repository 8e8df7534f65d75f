// groupcoord.DeviceCommunicator: a coordinator's device communicator (g.device_communicator,
// borrowed: checked against its coordinator on every use) or a sibling communicator
// (g.make_sibling_device_group(), owned).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "groupcoord/device_communicator.h"
#include "py_group.h"

namespace groupcoord {
namespace python {

/// See the file comment.
class PyCommunicator {
 public:
  /// Borrows `group`'s communicator.
  explicit PyCommunicator(std::shared_ptr<PyGroup> group);
  /// Owns a sibling communicator of `group`.
  PyCommunicator(std::shared_ptr<DeviceCommunicator> owned, const PyGroup& group);

  /// The communicator; DistributedError when the borrowed one is gone.
  DeviceCommunicator& get() const;
  const std::string& label() const { return label_; }
  /// The device of the coordinator it belongs to (recv allocates there).
  Device device() const { return device_; }

 private:
  std::shared_ptr<PyGroup> group_;
  DeviceCommunicator* borrowed_ = nullptr;
  std::shared_ptr<DeviceCommunicator> owned_;
  Device device_;
  std::string label_;
};

}  // namespace python
}  // namespace groupcoord
