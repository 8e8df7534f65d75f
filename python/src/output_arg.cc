#include "output_arg.h"

#include <utility>

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

/// `dim` counted from the front, or -1 when out of range.
int wrapped_dim(int dim, std::size_t rank) {
  const int n = static_cast<int>(rank);
  const int d = dim < 0 ? dim + n : dim;
  return d >= 0 && d < n ? d : -1;
}

}  // namespace

std::optional<OutputArray> output_array(py::handle out, const ImportedArray& in,
                                        const std::optional<Shape>& shape, const ArgContext& ctx,
                                        py::handle stream) {
  if (!out.is_none()) {
    ImportedArray target = import_array(out, ctx, Access::Write, stream, Ownership::Borrowed);
    return OutputArray{py::reinterpret_borrow<py::object>(out), std::move(target.tensor)};
  }
  if (!in.framework || !shape) return std::nullopt;
  OutputArray result;
  result.object = framework_empty(in.object, *in.framework, in.tensor, *shape, &result.tensor);
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
