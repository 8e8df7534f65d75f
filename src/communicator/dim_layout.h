// Moving one dimension to the front and back, so that a collective along any dim can run as a
// collective along dim 0 (where every rank's block is one contiguous run of memory).
//
// vLLM's reduce_scatter uses input.movedim(0, dim), which equals movedim(dim, 0) only for dims 0
// and 1: for dim >= 2 of a 3-d or larger tensor it scatters the wrong axis. Here both directions
// are spelled out and the result always has the caller's axis order.
#pragma once

#include "communicator/op_label.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace comm {

/// A contiguous tensor holding `tensor` with dimension `dim` (already wrapped) first and the other
/// dimensions in their original order. No copy when that layout is already contiguous.
Tensor move_dim_to_front(const Tensor& tensor, int dim);

/// The inverse of move_dim_to_front: a contiguous tensor with dim 0 of `front` moved back to
/// position `dim`. No copy when `dim` is 0 and `front` is contiguous.
Tensor move_dim_from_front(const Tensor& front, int dim);

/// Product of the sizes of every dimension but `dim` (1 for a 1-d tensor): the elements one index
/// of `dim` stands for. Well defined even when the size of `dim` is 0.
std::int64_t elements_per_index(const Shape& shape, int dim);

}  // namespace comm
}  // namespace groupcoord
