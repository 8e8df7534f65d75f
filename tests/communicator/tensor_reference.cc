#include "tensor_reference.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "groupcoord/half.h"

namespace groupcoord {
namespace testing {

namespace {

// Address of the element at `index`.
char* element_address(const Tensor& tensor, const Shape& index) {
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < index.size(); ++d) offset += index[d] * tensor.strides()[d];
  return static_cast<char*>(tensor.data_ptr()) + offset * tensor.element_size();
}

template <typename T>
void store_as(char* where, T value) {
  std::memcpy(where, &value, sizeof(T));
}

template <typename T>
T load_as(const char* where) {
  T value;
  std::memcpy(&value, where, sizeof(T));
  return value;
}

void write_value(char* where, DType dtype, double v) {
  const float f = static_cast<float>(v);
  switch (dtype) {
    case DType::Float32:
      return store_as<float>(where, f);
    case DType::Float64:
      return store_as<double>(where, v);
    case DType::Float16:
      return store_as<std::uint16_t>(where, float_to_half(f));
    case DType::BFloat16:
      return store_as<std::uint16_t>(where, float_to_bfloat16(f));
    case DType::Float8E4M3:
      return store_as<std::uint8_t>(where, float_to_float8_e4m3fn(f));
    case DType::Float8E5M2:
      return store_as<std::uint8_t>(where, float_to_float8_e5m2(f));
    case DType::Int8:
      return store_as<std::int8_t>(where, static_cast<std::int8_t>(v));
    case DType::UInt8:
      return store_as<std::uint8_t>(where, static_cast<std::uint8_t>(v));
    case DType::Int32:
      return store_as<std::int32_t>(where, static_cast<std::int32_t>(v));
    case DType::Int64:
      return store_as<std::int64_t>(where, static_cast<std::int64_t>(v));
    case DType::Bool:
      return store_as<std::uint8_t>(where, v != 0 ? 1 : 0);
  }
  throw std::logic_error("write_value: unknown dtype");
}

double read_value(const char* where, DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return load_as<float>(where);
    case DType::Float64:
      return load_as<double>(where);
    case DType::Float16:
      return half_to_float(load_as<std::uint16_t>(where));
    case DType::BFloat16:
      return bfloat16_to_float(load_as<std::uint16_t>(where));
    case DType::Float8E4M3:
      return float8_e4m3fn_to_float(load_as<std::uint8_t>(where));
    case DType::Float8E5M2:
      return float8_e5m2_to_float(load_as<std::uint8_t>(where));
    case DType::Int8:
      return load_as<std::int8_t>(where);
    case DType::UInt8:
      return load_as<std::uint8_t>(where);
    case DType::Int32:
      return load_as<std::int32_t>(where);
    case DType::Int64:
      return static_cast<double>(load_as<std::int64_t>(where));
    case DType::Bool:
      return load_as<std::uint8_t>(where) != 0 ? 1 : 0;
  }
  throw std::logic_error("read_value: unknown dtype");
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

std::int64_t linear_index(const Shape& shape, const Shape& index) {
  std::int64_t linear = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) linear = linear * shape[d] + index[d];
  return linear;
}

double datum(int rank, std::int64_t i) {
  return static_cast<double>((rank * 31 + i * 7 + 5) % 23) - 11.0;
}

void fill(const Tensor& tensor, const IndexFn& fn) {
  for_each_index(tensor.shape(), [&](const Shape& index) {
    write_value(element_address(tensor, index), tensor.dtype(), fn(index));
  });
}

Tensor rank_tensor(const Shape& shape, DType dtype, int rank) {
  Tensor tensor = Tensor::empty(shape, dtype);
  fill(tensor, [&](const Shape& index) { return datum(rank, linear_index(shape, index)); });
  return tensor;
}

Tensor rank_tensor_strided(const Shape& shape, DType dtype, int rank) {
  // Allocate with the last dim first, then view it back into `shape`: a genuinely strided view.
  Shape permuted = shape;
  permuted.insert(permuted.begin(), permuted.back());
  permuted.pop_back();
  Tensor view = Tensor::empty(permuted, dtype).movedim(0, -1);
  fill(view, [&](const Shape& index) { return datum(rank, linear_index(shape, index)); });
  return view;
}

double read(const Tensor& tensor, const Shape& index) {
  return read_value(element_address(tensor, index), tensor.dtype());
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
