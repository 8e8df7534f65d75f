#include "cuda_values.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>

#include "groupcoord/cuda/stream.h"
#include "groupcoord/half.h"

namespace groupcoord {
namespace testing {

namespace {

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
  }
}

template <typename T>
void put(void* out, T value) {
  std::memcpy(out, &value, sizeof(T));
}

template <typename T>
T get(const void* in) {
  T value;
  std::memcpy(&value, in, sizeof(T));
  return value;
}

}  // namespace

void encode_value(DType dtype, double value, void* out) {
  const float f = static_cast<float>(value);
  switch (dtype) {
    case DType::Float32:
      put(out, f);
      break;
    case DType::Float16:
      put(out, float_to_half(f));
      break;
    case DType::BFloat16:
      put(out, float_to_bfloat16(f));
      break;
    case DType::Float64:
      put(out, value);
      break;
    case DType::Int8:
      put(out, static_cast<std::int8_t>(value));
      break;
    case DType::UInt8:
      put(out, static_cast<std::uint8_t>(value));
      break;
    case DType::Int32:
      put(out, static_cast<std::int32_t>(value));
      break;
    case DType::Int64:
      put(out, static_cast<std::int64_t>(value));
      break;
    case DType::Bool:
      put(out, static_cast<std::uint8_t>(value != 0 ? 1 : 0));
      break;
    case DType::Float8E4M3:
      put(out, float_to_float8_e4m3fn(f));
      break;
    case DType::Float8E5M2:
      put(out, float_to_float8_e5m2(f));
      break;
  }
}

double decode_value(DType dtype, const void* in) {
  switch (dtype) {
    case DType::Float32:
      return get<float>(in);
    case DType::Float16:
      return half_to_float(get<std::uint16_t>(in));
    case DType::BFloat16:
      return bfloat16_to_float(get<std::uint16_t>(in));
    case DType::Float64:
      return get<double>(in);
    case DType::Int8:
      return get<std::int8_t>(in);
    case DType::UInt8:
      return get<std::uint8_t>(in);
    case DType::Int32:
      return get<std::int32_t>(in);
    case DType::Int64:
      return static_cast<double>(get<std::int64_t>(in));
    case DType::Bool:
      return get<std::uint8_t>(in) != 0 ? 1.0 : 0.0;
    case DType::Float8E4M3:
      return float8_e4m3fn_to_float(get<std::uint8_t>(in));
    case DType::Float8E5M2:
      return float8_e5m2_to_float(get<std::uint8_t>(in));
  }
  return 0;
}

std::int64_t count_of(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

std::int64_t flat_index(const Shape& shape, const std::vector<std::int64_t>& coords) {
  std::int64_t index = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) index = index * shape[d] + coords[d];
  return index;
}

std::vector<std::int64_t> coords_of(const Shape& shape, std::int64_t index) {
  std::vector<std::int64_t> coords(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    coords[d] = index % shape[d];
    index /= shape[d];
  }
  return coords;
}

void upload(void* device_ptr, const void* host, std::size_t bytes, Device device) {
  if (bytes == 0) return;
  cudaStream_t stream = current_cuda_stream(device);
  check_cuda(cudaMemcpyAsync(device_ptr, host, bytes, cudaMemcpyHostToDevice, stream), "upload");
  check_cuda(cudaStreamSynchronize(stream), "upload: sync");
}

void fill_bytes(void* device_ptr, int byte, std::size_t bytes, Device device) {
  if (bytes == 0) return;
  cudaStream_t stream = current_cuda_stream(device);
  check_cuda(cudaMemsetAsync(device_ptr, byte, bytes, stream), "fill_bytes");
  check_cuda(cudaStreamSynchronize(stream), "fill_bytes: sync");
}

Tensor device_tensor(const Shape& shape, DType dtype, Device device,
                     const std::function<double(std::int64_t)>& value) {
  const std::int64_t n = count_of(shape);
  const std::size_t size = dtype_size(dtype);
  std::vector<unsigned char> host(static_cast<std::size_t>(n) * size);
  for (std::int64_t i = 0; i < n; ++i) encode_value(dtype, value(i), host.data() + i * size);
  Tensor tensor = Tensor::empty(shape, dtype, device);  // stream-ordered on the current stream
  upload(tensor.data_ptr(), host.data(), host.size(), device);
  return tensor;
}

Tensor device_floats(const Shape& shape, Device device,
                     const std::function<double(std::int64_t)>& value) {
  return device_tensor(shape, DType::Float32, device, value);
}

std::vector<double> host_values(const Tensor& tensor) {
  if (!tensor.is_contiguous() || !tensor.device().is_cuda()) {
    throw std::invalid_argument("host_values needs a contiguous CUDA tensor, got " + tensor.str());
  }
  check_cuda(cudaStreamSynchronize(current_cuda_stream(tensor.device())), "host_values: sync");
  std::vector<unsigned char> host(tensor.nbytes());
  if (!host.empty()) {
    check_cuda(cudaMemcpy(host.data(), tensor.data_ptr(), host.size(), cudaMemcpyDeviceToHost),
               "host_values: download");
  }
  std::vector<double> values(static_cast<std::size_t>(tensor.numel()));
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = decode_value(tensor.dtype(), host.data() + i * tensor.element_size());
  }
  return values;
}

int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace testing
}  // namespace groupcoord
