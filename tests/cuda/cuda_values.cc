#include "cuda_values.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "groupcoord/cuda/stream.h"

namespace groupcoord {
namespace testing {

namespace {

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
  }
}

}  // namespace

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
  const std::int64_t n = element_count(shape);
  const std::size_t size = dtype_size(dtype);
  std::vector<unsigned char> host(static_cast<std::size_t>(n) * size);
  for (std::int64_t i = 0; i < n; ++i) write_element(host.data() + i * size, dtype, value(i));
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
    values[i] = read_element(host.data() + i * tensor.element_size(), tensor.dtype());
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

void prepare_nccl_environment(int rank, int local_ranks) {
  if (local_ranks > visible_gpus()) {
    const std::string host = "gc-test-host-" + std::to_string(rank);
    setenv("NCCL_HOSTID", host.c_str(), /*overwrite=*/0);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);
}

}  // namespace testing
}  // namespace groupcoord
