#include "coord_tensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/shape.h"
#include "groupcoord/half.h"

namespace groupcoord {
namespace testing {

namespace {

double read_scalar(const char* p, DType dtype) {
  switch (dtype) {
    case DType::Float32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::Float64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::Float16: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return half_to_float(v);
    }
    case DType::BFloat16: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return bfloat16_to_float(v);
    }
    case DType::Int8: {
      std::int8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case DType::UInt8: {
      std::uint8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case DType::Int32: {
      std::int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::Int64: {
      std::int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    default:
      ADD_FAILURE() << "unsupported dtype " << dtype_name(dtype);
      return 0;
  }
}

void write_scalar(char* p, DType dtype, double value) {
  switch (dtype) {
    case DType::Float32: {
      float v = static_cast<float>(value);
      std::memcpy(p, &v, 4);
      return;
    }
    case DType::Float64: {
      std::memcpy(p, &value, 8);
      return;
    }
    case DType::Float16: {
      std::uint16_t v = float_to_half(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      return;
    }
    case DType::BFloat16: {
      std::uint16_t v = float_to_bfloat16(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      return;
    }
    case DType::Int8: {
      auto v = static_cast<std::int8_t>(value);
      std::memcpy(p, &v, 1);
      return;
    }
    case DType::UInt8: {
      auto v = static_cast<std::uint8_t>(value);
      std::memcpy(p, &v, 1);
      return;
    }
    case DType::Int32: {
      auto v = static_cast<std::int32_t>(value);
      std::memcpy(p, &v, 4);
      return;
    }
    case DType::Int64: {
      auto v = static_cast<std::int64_t>(value);
      std::memcpy(p, &v, 8);
      return;
    }
    default:
      ADD_FAILURE() << "unsupported dtype " << dtype_name(dtype);
  }
}

}  // namespace

const std::vector<DType>& test_dtypes() {
  static const std::vector<DType> dtypes = {DType::Float32, DType::Float16, DType::BFloat16,
                                            DType::Int32, DType::Int64};
  return dtypes;
}

double rank_value(int rank, std::int64_t i) {
  return static_cast<double>((rank * 7 + i * 3) % 23) - 5.0;
}

Tensor make_tensor(const Shape& shape, DType dtype,
                   const std::function<double(std::int64_t)>& value) {
  Tensor t = Tensor::empty(shape, dtype);
  char* data = t.data_ptr<char>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    write_scalar(data + i * t.element_size(), dtype, value(i));
  }
  return t;
}

Shape unravel(std::int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
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

std::vector<double> tensor_values(const Tensor& tensor) {
  std::vector<double> out(static_cast<std::size_t>(tensor.numel()));
  const char* data = tensor.data_ptr<const char>();
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    const Shape index = unravel(i, tensor.shape());
    std::int64_t offset = 0;
    for (int d = 0; d < tensor.dim(); ++d) offset += index[d] * tensor.stride(d);
    out[i] = read_scalar(data + offset * static_cast<std::int64_t>(tensor.element_size()),
                         tensor.dtype());
  }
  return out;
}

void expect_tensor(const Tensor& tensor, const Shape& shape, DType dtype,
                   const std::vector<double>& expected, const std::string& what) {
  ASSERT_TRUE(tensor.defined()) << what;
  ASSERT_EQ(tensor.shape(), shape) << what << ": got " << tensor.str();
  ASSERT_EQ(tensor.dtype(), dtype) << what;
  const std::vector<double> got = tensor_values(tensor);
  ASSERT_EQ(got.size(), expected.size()) << what;
  int mismatches = 0;
  for (std::size_t i = 0; i < got.size() && mismatches < 5; ++i) {
    if (got[i] != expected[i]) {
      ADD_FAILURE() << what << ": element " << i << " " << detail::shape_str(unravel(i, shape))
                    << " is " << got[i] << ", expected " << expected[i];
      ++mismatches;
    }
  }
}

}  // namespace testing
}  // namespace groupcoord
