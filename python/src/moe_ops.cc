#include "moe_ops.h"

#include "groupcoord/check.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {

std::vector<ImportedArray> import_extra(py::handle extra, const std::string& label, const char* op,
                                        py::handle stream) {
  std::vector<ImportedArray> out;
  if (extra.is_none()) return out;
  GC_CHECK(py::isinstance<py::list>(extra) || py::isinstance<py::tuple>(extra), label, ".", op,
           ": extra_tensors must be None or a list of arrays, got ",
           py::repr(extra).cast<std::string>());
  for (py::handle item : extra) {
    out.push_back(import_array(item, {label, op, "extra_tensors[i]"}, Access::Read, stream));
  }
  return out;
}

std::vector<Tensor> tensors_of(const std::vector<ImportedArray>& arrays) {
  std::vector<Tensor> out;
  for (const ImportedArray& a : arrays) out.push_back(a.tensor);
  return out;
}

py::list export_extra(const std::vector<Tensor>& outs, const std::vector<ImportedArray>& ins,
                      const ImportedArray& fallback) {
  py::list result;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    result.append(export_like(outs[i], i < ins.size() ? ins[i] : fallback));
  }
  return result;
}

}  // namespace python
}  // namespace groupcoord
