// groupcoord.Handle: a Work (isend_object, isend_tensor_dict, irecv_tensor_dict, isend/irecv)
// with wait() and is_completed(), as torch's Work.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "groupcoord/work.h"

namespace groupcoord {
namespace python {

/// The Python-side object.
struct PyWork {
  std::shared_ptr<Work> work;
};

/// Registers groupcoord.Handle.
void bind_work(pybind11::module_& module);

/// `works` as a Python list of Handles.
pybind11::list handle_list(const std::vector<std::shared_ptr<Work>>& works);

}  // namespace python
}  // namespace groupcoord
