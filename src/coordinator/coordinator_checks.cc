#include "coordinator/coordinator_checks.h"

#include "communicator/output_tensor.h"
#include "core/shape.h"
#include "groupcoord/check.h"

namespace groupcoord {
namespace coordinator_detail {

namespace {

std::string sizes_str(const std::vector<std::int64_t>& sizes) { return detail::shape_str(sizes); }

void check_sizes_entries(const comm::OpLabel& label, const std::vector<std::int64_t>& sizes,
                         int world_size) {
  GC_CHECK(static_cast<int>(sizes.size()) == world_size, label, ": sizes ", sizes_str(sizes),
           " has ", sizes.size(), " entries, expected one per rank (", world_size, ")");
  for (std::int64_t s : sizes) {
    GC_CHECK(s >= 0, label, ": sizes ", sizes_str(sizes), " has a negative entry ", s);
  }
}

}  // namespace

void check_group_rank(const comm::OpLabel& label, const char* what, int value, int world_size) {
  GC_CHECK(value >= 0 && value < world_size, label, ": ", what, " ", value,
           " is out of range for a group of ", world_size, " ranks");
}

void check_not_self(const comm::OpLabel& label, const char* what, int value, int self) {
  GC_CHECK(value != self, label, ": ", what, " ", value, " is this rank itself");
}

void check_tensor(const comm::OpLabel& label, const Tensor& tensor, const char* what) {
  GC_CHECK(tensor.defined(), label, ": ", what, " tensor is undefined");
}

int check_dim(const comm::OpLabel& label, const Tensor& tensor, int dim) {
  check_tensor(label, tensor);
  const int ndim = tensor.dim();
  GC_CHECK(dim >= -ndim && dim < ndim, label, ": dim ", dim, " is out of range for a ", ndim,
           "-d tensor ", detail::shape_str(tensor.shape()));
  return dim < 0 ? dim + ndim : dim;
}

void check_gatherv_sizes(const comm::OpLabel& label, const Tensor& input, int dim,
                         const std::optional<std::vector<std::int64_t>>& sizes, int world_size,
                         int rank) {
  const int d = check_dim(label, input, dim);
  if (!sizes) return;
  check_sizes_entries(label, *sizes, world_size);
  GC_CHECK((*sizes)[rank] == input.size(d), label, ": sizes ", sizes_str(*sizes), " says rank ",
           rank, " has ", (*sizes)[rank], " along dim ", dim, " but its input ",
           detail::shape_str(input.shape()), " has ", input.size(d));
}

void check_scatterv_sizes(const comm::OpLabel& label, const Tensor& input, int dim,
                          const std::optional<std::vector<std::int64_t>>& sizes, int world_size) {
  const int d = check_dim(label, input, dim);
  const std::int64_t extent = input.size(d);
  if (!sizes) {
    GC_CHECK(extent % world_size == 0, label, ": size ", extent, " of dim ", dim, " of ",
             detail::shape_str(input.shape()), " does not divide by the group size ", world_size);
    return;
  }
  check_sizes_entries(label, *sizes, world_size);
  std::int64_t total = 0;
  for (std::int64_t s : *sizes) total += s;
  GC_CHECK(total == extent, label, ": sizes ", sizes_str(*sizes), " sum to ", total, " but dim ",
           dim, " of ", detail::shape_str(input.shape()), " has ", extent);
}

Tensor copy_into_output(const std::string& unique_name, const char* op, const Tensor& input,
                        const Tensor& out) {
  comm::check_output(comm::OpLabel{unique_name, op}, out, input.shape(), input.dtype(),
                     input.device());
  return comm::write_into(out, input);
}

}  // namespace coordinator_detail
}  // namespace groupcoord
