// The argument checks every layer shares: the communicators (cpu, cuda, an engine's) and the
// coordinator above them. Each throws std::invalid_argument whose message starts with the op's
// label ("<group> <op>: ", op_label.h) and names the argument and the offending value, e.g.
//   "tp:0 all_gather: dim 3 is out of range for a 3-d tensor [2, 3, 4]".
// The coordinator checks before handing anything to a communicator, so its messages are the same
// whatever communicator is plugged in; the communicators check again for direct callers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "communicator/op_label.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace comm {

/// `tensor` is defined; `what` names the argument ("input", "hidden_states", ...).
void check_defined(const OpLabel& where, const Tensor& tensor, const char* what);
/// `tensor` is defined and lives on `device`, the device of the communicator running the op.
void check_tensor_on(const OpLabel& where, const Tensor& tensor, const char* what, Device device);
/// check_tensor_on the CPU.
void check_cpu_tensor(const OpLabel& where, const Tensor& tensor, const char* what);

/// 0 <= peer < world_size and, when !allow_self, peer != rank (a transfer to oneself would wait
/// for a matching call that never comes). `what` names the argument ("dst", "src").
void check_peer_rank(const OpLabel& where, int peer, const char* what, int rank, int world_size,
                     bool allow_self);

/// `dim` in [-ndim, ndim), wrapped into [0, ndim).
int wrap_dim(const OpLabel& where, int dim, int ndim);
/// wrap_dim for `tensor` (defined), whose shape the message shows.
int check_dim(const OpLabel& where, const Tensor& tensor, int dim);
/// The size of `tensor` along `dim` (wrapped, `given` as the caller passed it) divides by
/// `world_size`: the precondition of reduce_scatter.
void check_divisible(const OpLabel& where, const Tensor& tensor, int dim, int given,
                     int world_size);

/// `sizes` (the v-variants' per-rank sizes) has `world_size` entries, all non-negative.
void check_sizes_shape(const OpLabel& where, const std::vector<std::int64_t>& sizes,
                       int world_size);
/// sizes[rank] equals the size of `input` along dim `d` (the gathered dim; `given` as the caller
/// passed it, for the message).
void check_own_size(const OpLabel& where, const std::vector<std::int64_t>& sizes, int rank,
                    const Tensor& input, int d, int given);
/// `sizes` sums to the size of `input` along dim `d` (the scattered dim; `given` as passed).
void check_sizes_sum(const OpLabel& where, const std::vector<std::int64_t>& sizes,
                     const Tensor& input, int d, int given);
/// all_gatherv's arguments: `dim` valid for `input` and, when `sizes` is given, one non-negative
/// entry per rank with this rank's equal to its input's size along `dim`. Returns the wrapped dim.
int check_gatherv_args(const OpLabel& where, const Tensor& input, int dim,
                       const std::optional<std::vector<std::int64_t>>& sizes, int world_size,
                       int rank);
/// reduce_scatterv's: `dim` valid and, when `sizes` is given, one non-negative entry per rank
/// summing to the input's size along `dim`; without sizes that size divides by `world_size`.
/// Returns the wrapped dim.
int check_scatterv_args(const OpLabel& where, const Tensor& input, int dim,
                        const std::optional<std::vector<std::int64_t>>& sizes, int world_size);

/// A caller-provided output: defined, on `device`, of `dtype` and `shape`, contiguous.
void check_output(const OpLabel& where, const Tensor& out, const Shape& shape, DType dtype,
                  Device device);

}  // namespace comm
}  // namespace groupcoord
