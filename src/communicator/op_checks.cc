#include "communicator/op_checks.h"

#include <numeric>

#include "communicator/sizes.h"
#include "core/shape.h"
#include "groupcoord/check.h"

namespace groupcoord {
namespace comm {

void check_defined(const OpLabel& where, const Tensor& tensor, const char* what) {
  GC_CHECK(tensor.defined(), where, ": ", what, " is an undefined tensor");
}

void check_tensor_on(const OpLabel& where, const Tensor& tensor, const char* what, Device device) {
  check_defined(where, tensor, what);
  if (device.is_cpu()) {
    GC_CHECK(tensor.device().is_cpu(), where, ": ", what,
             " must be a CPU tensor for the cpu communicator, got ", tensor.str());
  } else {
    GC_CHECK(tensor.device() == device, where, ": ", what, " must be a CUDA tensor on ",
             device.str(), " (the communicator's device), got ", tensor.str());
  }
}

void check_cpu_tensor(const OpLabel& where, const Tensor& tensor, const char* what) {
  check_tensor_on(where, tensor, what, Device::cpu());
}

void check_peer_rank(const OpLabel& where, int peer, const char* what, int rank, int world_size,
                     bool allow_self) {
  GC_CHECK(peer >= 0 && peer < world_size, where, ": ", what, " ", peer,
           " is out of range for a group of ", world_size, " rank(s)");
  GC_CHECK(allow_self || peer != rank, where, ": ", what, " ", peer, " is this rank itself (rank ",
           rank, " of ", world_size, ")");
}

int wrap_dim(const OpLabel& where, int dim, int ndim) {
  GC_CHECK(dim >= -ndim && dim < ndim, where, ": dim ", dim, " is out of range for a ", ndim,
           "-d tensor");
  return dim < 0 ? dim + ndim : dim;
}

int check_dim(const OpLabel& where, const Tensor& tensor, int dim) {
  check_defined(where, tensor, "input");
  const int ndim = tensor.dim();
  GC_CHECK(dim >= -ndim && dim < ndim, where, ": dim ", dim, " is out of range for a ", ndim,
           "-d tensor ", detail::shape_str(tensor.shape()));
  return dim < 0 ? dim + ndim : dim;
}

void check_divisible(const OpLabel& where, const Tensor& tensor, int dim, int given,
                     int world_size) {
  GC_CHECK(tensor.size(dim) % world_size == 0, where, ": size ", tensor.size(dim), " of dim ",
           given, " of ", detail::shape_str(tensor.shape()), " is not divisible by the world size ",
           world_size);
}

void check_sizes_shape(const OpLabel& where, const std::vector<std::int64_t>& sizes,
                       int world_size) {
  GC_CHECK(static_cast<int>(sizes.size()) == world_size, where, ": sizes ", sizes_str(sizes),
           " has ", sizes.size(), " entries, expected one per rank (", world_size, ")");
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    GC_CHECK(sizes[r] >= 0, where, ": sizes ", sizes_str(sizes), " has a negative entry ", sizes[r],
             " for rank ", r);
  }
}

void check_own_size(const OpLabel& where, const std::vector<std::int64_t>& sizes, int rank,
                    const Tensor& input, int d, int given) {
  GC_CHECK(sizes[rank] == input.size(d), where, ": sizes ", sizes_str(sizes), " says rank ", rank,
           " has ", sizes[rank], " along dim ", given, " but its input ",
           detail::shape_str(input.shape()), " has ", input.size(d));
}

void check_sizes_sum(const OpLabel& where, const std::vector<std::int64_t>& sizes,
                     const Tensor& input, int d, int given) {
  const std::int64_t sum = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
  GC_CHECK(sum == input.size(d), where, ": sizes ", sizes_str(sizes), " sum to ", sum, " but dim ",
           given, " of the input ", detail::shape_str(input.shape()), " has ", input.size(d));
}

int check_gatherv_args(const OpLabel& where, const Tensor& input, int dim,
                       const std::optional<std::vector<std::int64_t>>& sizes, int world_size,
                       int rank) {
  const int d = check_dim(where, input, dim);
  if (sizes) {
    check_sizes_shape(where, *sizes, world_size);
    check_own_size(where, *sizes, rank, input, d, dim);
  }
  return d;
}

int check_scatterv_args(const OpLabel& where, const Tensor& input, int dim,
                        const std::optional<std::vector<std::int64_t>>& sizes, int world_size) {
  const int d = check_dim(where, input, dim);
  if (!sizes) {
    check_divisible(where, input, d, dim, world_size);
    return d;
  }
  check_sizes_shape(where, *sizes, world_size);
  check_sizes_sum(where, *sizes, input, d, dim);
  return d;
}

void check_output(const OpLabel& where, const Tensor& out, const Shape& shape, DType dtype,
                  Device device) {
  GC_CHECK(out.defined(), where, ": out is an undefined tensor");
  GC_CHECK(out.device() == device, where, ": out must be on ", device.str(), ", got ", out.str());
  GC_CHECK(out.dtype() == dtype, where, ": out has dtype ", dtype_name(out.dtype()),
           ", the result has dtype ", dtype_name(dtype));
  GC_CHECK(out.shape() == shape, where, ": out has shape ", detail::shape_str(out.shape()),
           ", the result has shape ", detail::shape_str(shape));
  GC_CHECK(out.is_contiguous(), where, ": out must be contiguous, got strides ",
           detail::shape_str(out.strides()));
}

}  // namespace comm
}  // namespace groupcoord
