// GroupCoordinator's tensor-dictionary calls (vLLM's *_tensor_dict): Python dicts in and out,
// arrays without copies, other values pickled. World size 1 bypasses as vLLM does.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "py_group.h"

namespace groupcoord {
namespace python {

/// The options every point-to-point tensor-dict call shares.
struct TensorDictOptions {
  pybind11::handle peer;                ///< dst or src (None: next / previous rank)
  pybind11::handle all_gather_group;    ///< a GroupCoordinator or None
  pybind11::handle all_gather_tensors;  ///< dict[str, bool] or None
  pybind11::handle stream;
  pybind11::handle array_library;  ///< receivers only
};

pybind11::object broadcast_tensor_dict(const std::shared_ptr<PyGroup>& g,
                                       pybind11::handle tensor_dict, int src,
                                       pybind11::handle stream, pybind11::handle array_library);
pybind11::object send_tensor_dict(const std::shared_ptr<PyGroup>& g, pybind11::handle tensor_dict,
                                  const TensorDictOptions& options);
pybind11::list isend_tensor_dict(const std::shared_ptr<PyGroup>& g, pybind11::handle tensor_dict,
                                 const TensorDictOptions& options);
pybind11::object recv_tensor_dict(const std::shared_ptr<PyGroup>& g,
                                  const TensorDictOptions& options);
/// (dict, handles, postprocess): the dict's arrays fill as the handles complete; each
/// postprocess callable runs one all_gather reassembly and updates the dict.
pybind11::tuple irecv_tensor_dict(const std::shared_ptr<PyGroup>& g,
                                  const TensorDictOptions& options);

}  // namespace python
}  // namespace groupcoord
