#include "coord_tensors.h"

#include <gtest/gtest.h>

#include "core/shape.h"

namespace groupcoord {
namespace testing {

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
    write_element(data + i * t.element_size(), dtype, value(i));
  }
  return t;
}

std::vector<double> tensor_values(const Tensor& tensor) {
  std::vector<double> out(static_cast<std::size_t>(tensor.numel()));
  const char* data = tensor.data_ptr<const char>();
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    const Shape index = unravel(i, tensor.shape());
    std::int64_t offset = 0;
    for (int d = 0; d < tensor.dim(); ++d) offset += index[d] * tensor.stride(d);
    out[i] = read_element(data + offset * static_cast<std::int64_t>(tensor.element_size()),
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
