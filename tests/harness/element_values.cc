#include "element_values.h"

#include <cstring>
#include <stdexcept>

#include "groupcoord/half.h"

namespace groupcoord {
namespace testing {

namespace {

template <typename T>
void store_as(void* where, T value) {
  std::memcpy(where, &value, sizeof(T));
}

template <typename T>
T load_as(const void* where) {
  T value;
  std::memcpy(&value, where, sizeof(T));
  return value;
}

}  // namespace

double read_element(const void* where, DType dtype) {
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
  throw std::logic_error("read_element: unknown dtype");
}

void write_element(void* where, DType dtype, double value) {
  const float f = static_cast<float>(value);
  switch (dtype) {
    case DType::Float32:
      return store_as<float>(where, f);
    case DType::Float64:
      return store_as<double>(where, value);
    case DType::Float16:
      return store_as<std::uint16_t>(where, float_to_half(f));
    case DType::BFloat16:
      return store_as<std::uint16_t>(where, float_to_bfloat16(f));
    case DType::Float8E4M3:
      return store_as<std::uint8_t>(where, float_to_float8_e4m3fn(f));
    case DType::Float8E5M2:
      return store_as<std::uint8_t>(where, float_to_float8_e5m2(f));
    case DType::Int8:
      return store_as<std::int8_t>(where, static_cast<std::int8_t>(value));
    case DType::UInt8:
      return store_as<std::uint8_t>(where, static_cast<std::uint8_t>(value));
    case DType::Int32:
      return store_as<std::int32_t>(where, static_cast<std::int32_t>(value));
    case DType::Int64:
      return store_as<std::int64_t>(where, static_cast<std::int64_t>(value));
    case DType::Bool:
      return store_as<std::uint8_t>(where, value != 0 ? 1 : 0);
  }
  throw std::logic_error("write_element: unknown dtype");
}

std::int64_t element_count(const Shape& shape) {
  std::int64_t count = 1;
  for (std::int64_t size : shape) count *= size;
  return count;
}

Shape unravel(std::int64_t flat, const Shape& shape) {
  Shape index(shape.size(), 0);
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 0) return index;
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

std::int64_t ravel(const Shape& index, const Shape& shape) {
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

}  // namespace testing
}  // namespace groupcoord
