// Caller-provided outputs (`out=`, beyond vLLM's API): the shape each collective's result has,
// the checks an `out` tensor must pass, and writing a computed result into it. Shared by the
// DeviceCommunicator defaults, the cpu and cuda communicators and the coordinator.
#pragma once

#include "communicator/op_label.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace comm {

/// `shape` with dim `dim` (already wrapped) multiplied by `world_size` (all_gather's result).
Shape gathered_shape(const Shape& shape, int dim, int world_size);
/// `shape` with dim `dim` (already wrapped) divided by `world_size` (reduce_scatter's result).
Shape scattered_shape(const Shape& shape, int dim, int world_size);

/// Copies `result` into `out` (same shape and dtype) unless they are the same memory; returns
/// `out`.
Tensor write_into(const Tensor& out, const Tensor& result);

}  // namespace comm
}  // namespace groupcoord
