#include "tensor_dict_convert.h"

#include <string>
#include <variant>

#include "pickle_codec.h"
#include "py_tensor.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {

ImportedTensorDict tensor_dict_from_python(py::handle dict, const ArgContext& ctx,
                                           py::handle stream) {
  if (!py::isinstance<py::dict>(dict)) {
    throw std::invalid_argument(
        ctx.owner + "." + ctx.op + ": expecting a dictionary, got " +
        py::str(py::type::handle_of(dict).attr("__name__")).cast<std::string>());
  }
  ImportedTensorDict out;
  bool have_stream = false;
  for (auto item : py::reinterpret_borrow<py::dict>(dict)) {
    if (!py::isinstance<py::str>(item.first)) {
      throw std::invalid_argument(ctx.owner + "." + ctx.op + ": keys must be str, got " +
                                  py::repr(item.first).cast<std::string>());
    }
    std::string key = item.first.cast<std::string>();
    if (!is_array(item.second)) {
      out.dict.emplace_back(std::move(key), dumps(item.second));
      continue;
    }
    ImportedArray in = import_array(item.second, ctx, Access::Read, stream);
    if (in.tensor.device().is_cuda() && !have_stream) {
      have_stream = true;
      out.stream = in.stream;
      out.device = in.tensor.device();
    }
    out.dict.emplace_back(std::move(key), std::move(in.tensor));
  }
  return out;
}

py::object value_to_python(const TensorDictValue& value, const ArrayLibrary* library,
                           StreamHandle stream) {
  if (const Bytes* bytes = std::get_if<Bytes>(&value)) return loads(*bytes);
  const Tensor& tensor = std::get<Tensor>(value);
  return export_tensor(tensor, library_or_default(library, tensor.device()), stream);
}

py::dict tensor_dict_to_python(const TensorDict& dict, const ArrayLibrary* library,
                               StreamHandle stream) {
  py::dict out;
  for (const auto& [key, value] : dict) out[py::str(key)] = value_to_python(value, library, stream);
  return out;
}

}  // namespace python
}  // namespace groupcoord
