// GroupCoordinator's object calls: any picklable object travels as its pickle
// (pickle.HIGHEST_PROTOCOL). World size 1 bypasses as vLLM does (the object itself comes back).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "py_group.h"

namespace groupcoord {
namespace python {

/// `obj` on `src`, the received object elsewhere.
pybind11::object broadcast_object(const std::shared_ptr<PyGroup>& g, pybind11::object obj, int src);
/// Fills `obj_list` in place on the non-src ranks; returns it.
pybind11::object broadcast_object_list(const std::shared_ptr<PyGroup>& g, pybind11::object obj_list,
                                       int src);
void send_object(const std::shared_ptr<PyGroup>& g, pybind11::object obj, int dst);
pybind11::object recv_object(const std::shared_ptr<PyGroup>& g, int src);
/// A groupcoord.Handle.
pybind11::object isend_object(const std::shared_ptr<PyGroup>& g, pybind11::object obj, int dst);

}  // namespace python
}  // namespace groupcoord
