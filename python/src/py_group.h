// groupcoord.GroupCoordinator's C++ side: a handle on a C++ GroupCoordinator that is either owned
// by the Python object (created with GroupCoordinator(...)) or borrowed from parallel_state
// (get_tp_group(), ...). A borrowed coordinator dies with destroy_model_parallel(); the handle
// notices (through GroupCoordinator::find, keyed by the never-reused unique name) and raises
// DistributedError instead of touching freed memory.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "groupcoord/group_coordinator.h"

namespace groupcoord {
namespace python {

/// See the file comment.
class PyGroup {
 public:
  /// Takes ownership of a coordinator created from Python.
  explicit PyGroup(std::unique_ptr<GroupCoordinator> owned);
  /// Borrows a coordinator owned elsewhere (parallel_state).
  explicit PyGroup(GroupCoordinator& borrowed);
  /// Destroys an owned coordinator with the GIL released (its teardown may wait for sends).
  ~PyGroup();
  PyGroup(const PyGroup&) = delete;
  PyGroup& operator=(const PyGroup&) = delete;

  /// The coordinator; throws DistributedError when a borrowed one no longer exists.
  GroupCoordinator& get() const;
  /// "GroupCoordinator(tp:0)", for messages.
  const std::string& label() const { return label_; }
  /// The coordinator's unique name.
  const std::string& unique_name() const { return unique_name_; }

  /// The Python object for a parallel_state coordinator: one object per coordinator, so that
  /// get_tp_group() is get_tp_group().
  static pybind11::object borrowed(GroupCoordinator& group);
  /// Forgets cached objects of coordinators that no longer exist (after destroy_*).
  static void prune_borrowed();

 private:
  std::unique_ptr<GroupCoordinator> owned_;
  GroupCoordinator* group_;
  /// GroupCoordinator::registry_generation() when a borrowed group_ was last found registered.
  /// (Atomic only so that a call on a helper thread is no data race; relaxed is enough.)
  mutable std::atomic<std::uint64_t> checked_generation_{~std::uint64_t{0}};
  std::string unique_name_;
  std::string label_;
};

}  // namespace python
}  // namespace groupcoord
