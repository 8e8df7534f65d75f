// The registration functions the module calls, one per bound concept (module.cc).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "py_group.h"

namespace groupcoord {
namespace python {

/// How the bindings hold a GroupCoordinator (shared with Python).
using GroupPtr = std::shared_ptr<PyGroup>;
/// The class object of groupcoord.GroupCoordinator.
using GroupClass = pybind11::class_<PyGroup, GroupPtr>;

void bind_process_group(pybind11::module_& module);
void bind_message_queue(pybind11::module_& module);
void bind_device_communicator(pybind11::module_& module);
/// Constructor, properties, lifetime and factories of GroupCoordinator.
GroupClass bind_group_coordinator(pybind11::module_& module);
/// GroupCoordinator's tensor calls.
void bind_group_tensor_ops(GroupClass& cls);
/// GroupCoordinator's object and tensor-dictionary calls.
void bind_group_object_ops(GroupClass& cls);
/// GroupCoordinator's NCCL symmetric memory and groupcoord.SymmetricMemoryStats.
void bind_symmetric_memory(pybind11::module_& module, GroupClass& cls);
void bind_parallel_state(pybind11::module_& module);
/// Module-level settings (array libraries, interruptible calls) and the benchmark hook.
void bind_settings(pybind11::module_& module);

}  // namespace python
}  // namespace groupcoord
