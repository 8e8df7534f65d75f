// Element-wise reduction kernels for all_reduce, one per (DType, ReduceOp).
#pragma once

#include <cstddef>
#include <functional>

#include "groupcoord/dtype.h"
#include "groupcoord/reduce_op.h"

namespace groupcoord {

/// Gloo's reduction signature: out[i] = op(a[i], b[i]) for i < n; `out` may alias `a`.
using ReduceFunction = std::function<void(void* out, const void* a, const void* b, std::size_t n)>;

/// The kernel for `op` on `dtype`:
///  - Float32/Float64/UInt8 and min/max of the integer types: Gloo's own kernels;
///  - Int8/Int32/Int64 sums wrap around on overflow (two's complement, as torch does) instead of
///    being undefined behaviour;
///  - Float16/BFloat16/fp8: each pair is widened to float, combined and rounded back (sum), or the
///    larger/smaller element is copied bit for bit (min/max);
///  - Bool (one byte, 0 or 1): sum and max are logical or, min is logical and.
ReduceFunction reduce_function(DType dtype, ReduceOp op);

}  // namespace groupcoord
