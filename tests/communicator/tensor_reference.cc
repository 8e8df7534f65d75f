#include "tensor_reference.h"

#include <sstream>

#include "element_values.h"

namespace groupcoord {
namespace testing {

namespace {

// Address of the element at `index`.
char* element_address(const Tensor& tensor, const Shape& index) {
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < index.size(); ++d) offset += index[d] * tensor.strides()[d];
  return static_cast<char*>(tensor.data_ptr()) + offset * tensor.element_size();
}

std::string shape_text(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

}  // namespace

void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& fn) {
  for (std::int64_t size : shape) {
    if (size == 0) return;
  }
  Shape index(shape.size(), 0);
  while (true) {
    fn(index);
    int d = static_cast<int>(shape.size()) - 1;
    while (d >= 0 && ++index[d] == shape[d]) index[d--] = 0;
    if (d < 0) return;
  }
}

double datum(int rank, std::int64_t i) {
  return static_cast<double>((rank * 31 + i * 7 + 5) % 23) - 11.0;
}

void fill(const Tensor& tensor, const IndexFn& fn) {
  for_each_index(tensor.shape(), [&](const Shape& index) {
    write_element(element_address(tensor, index), tensor.dtype(), fn(index));
  });
}

Tensor rank_tensor(const Shape& shape, DType dtype, int rank) {
  Tensor tensor = Tensor::empty(shape, dtype);
  fill(tensor, [&](const Shape& index) { return datum(rank, ravel(index, shape)); });
  return tensor;
}

Tensor rank_tensor_strided(const Shape& shape, DType dtype, int rank) {
  // Allocate with the last dim first, then view it back into `shape`: a genuinely strided view.
  Shape permuted = shape;
  permuted.insert(permuted.begin(), permuted.back());
  permuted.pop_back();
  Tensor view = Tensor::empty(permuted, dtype).movedim(0, -1);
  fill(view, [&](const Shape& index) { return datum(rank, ravel(index, shape)); });
  return view;
}

double read(const Tensor& tensor, const Shape& index) {
  return read_element(element_address(tensor, index), tensor.dtype());
}

std::string compare(const Tensor& actual, const Shape& shape, DType dtype, const IndexFn& fn) {
  if (!actual.defined()) return "result is undefined";
  if (actual.shape() != shape) {
    return "shape " + shape_text(actual.shape()) + " != expected " + shape_text(shape);
  }
  if (actual.dtype() != dtype) {
    return std::string("dtype ") + dtype_name(actual.dtype()) + " != expected " + dtype_name(dtype);
  }
  std::string error;
  for_each_index(shape, [&](const Shape& index) {
    if (!error.empty()) return;
    const double got = read(actual, index);
    const double want = fn(index);
    if (got != want) {
      std::ostringstream out;
      out << "element " << shape_text(index) << " is " << got << ", expected " << want;
      error = out.str();
    }
  });
  return error;
}

}  // namespace testing
}  // namespace groupcoord
