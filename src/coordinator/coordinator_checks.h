// Argument checks of GroupCoordinator. Each throws std::invalid_argument with a message that
// names the group (its unique name), the operation and the offending value, e.g.
//   "tp:0 all_gather: dim 3 is out of range for a 3-d tensor [2, 3, 4]".
// The coordinator checks before handing anything to a communicator, so the messages are the same
// whatever communicator (built-in or engine-registered) is plugged in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "communicator/op_label.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace coordinator_detail {

/// `value` (a group rank passed as `what`, e.g. "src") must lie in [0, world_size).
void check_group_rank(const comm::OpLabel& label, const char* what, int value, int world_size);

/// `value` must not be `self` (sending to or receiving from oneself would never complete).
void check_not_self(const comm::OpLabel& label, const char* what, int value, int self);

/// `tensor` must be defined.
void check_tensor(const comm::OpLabel& label, const Tensor& tensor, const char* what = "input");

/// `dim` must lie in [-ndim, ndim); returns it wrapped into [0, ndim).
int check_dim(const comm::OpLabel& label, const Tensor& tensor, int dim);

/// all_gatherv: `sizes` (when given) has world_size non-negative entries and sizes[rank] equals
/// the input's size along `dim`.
void check_gatherv_sizes(const comm::OpLabel& label, const Tensor& input, int dim,
                         const std::optional<std::vector<std::int64_t>>& sizes, int world_size,
                         int rank);

/// reduce_scatterv: `sizes` (when given) has world_size non-negative entries summing to the
/// input's size along `dim`; without sizes that size must divide by world_size.
void check_scatterv_sizes(const comm::OpLabel& label, const Tensor& input, int dim,
                          const std::optional<std::vector<std::int64_t>>& sizes, int world_size);

/// World size 1 with a caller-provided output: checks `out` against the input (the result of
/// every collective then has the input's shape) and copies the input into it; returns `out`.
Tensor copy_into_output(const std::string& unique_name, const char* op, const Tensor& input,
                        const Tensor& out);

}  // namespace coordinator_detail
}  // namespace groupcoord
