#include "output_arg.h"

#include <utility>

namespace py = pybind11;

namespace groupcoord {
namespace python {

int wrapped_dim(int dim, std::size_t rank) {
  const int n = static_cast<int>(rank);
  const int d = dim < 0 ? dim + n : dim;
  return d >= 0 && d < n ? d : -1;
}

std::optional<OutputArray> output_array(py::handle out, const ImportedArray& in, const Shape* shape,
                                        const ArgContext& ctx, py::handle stream) {
  if (!out.is_none()) {
    if (in.framework && out.ptr() == in.object.ptr()) {  // in place: out=input_
      return OutputArray{py::reinterpret_borrow<py::object>(out), in.tensor};
    }
    if (in.framework) {
      // The common case: out of the input's library on its device. The call runs on in.stream,
      // which is that library's current stream or was ordered after it: nothing else to look up.
      FrameworkArray target;
      if (read_framework_array(out, &target) && target.framework == *in.framework &&
          target.tensor.device() == in.tensor.device()) {
        return OutputArray{py::reinterpret_borrow<py::object>(out), std::move(target.tensor)};
      }
    }
    ImportedArray target = import_array(out, ctx, Access::Write, stream, Ownership::Borrowed);
    return OutputArray{py::reinterpret_borrow<py::object>(out), std::move(target.tensor)};
  }
  if (!in.framework || shape == nullptr) return std::nullopt;
  // A result of the input's shape (all_reduce) reuses the input's own shape object.
  const bool same_shape = *shape == in.tensor.shape();
  OutputArray result;
  result.object =
      framework_empty(*in.framework, in.object, in.tensor, in.dtype_object, *shape,
                      same_shape ? py::handle(in.shape_object) : py::handle(), &result.tensor);
  return result;
}

std::optional<Shape> gathered_shape(const Shape& shape, int dim, int world_size) {
  const int d = wrapped_dim(dim, shape.size());
  if (d < 0) return std::nullopt;
  Shape out = shape;
  out[static_cast<std::size_t>(d)] *= world_size;
  return out;
}

std::optional<Shape> scattered_shape(const Shape& shape, int dim, int world_size) {
  const int d = wrapped_dim(dim, shape.size());
  if (d < 0 || world_size <= 0 || shape[static_cast<std::size_t>(d)] % world_size != 0) {
    return std::nullopt;
  }
  Shape out = shape;
  out[static_cast<std::size_t>(d)] /= world_size;
  return out;
}

}  // namespace python
}  // namespace groupcoord
