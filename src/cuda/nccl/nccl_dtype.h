// Which NCCL data type and reduction carry each DType.
//
//   data movement (gather, broadcast, send/recv): every DType, as itself where NCCL has the type,
//     else as bytes (ncclUint8 with count * element size): bool, and fp8 on an NCCL < 2.24;
//   sums (all_reduce, reduce_scatter): f32, f16, bf16, f64, i8, u8, i32, i64 with ncclSum; fp8
//     with ncclSum when the loaded NCCL has fp8 types (>= 2.24), else std::invalid_argument;
//     bool as uint8 with ncclMax, i.e. logical or, as the cpu communicator does.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "communicator/op_label.h"
#include "groupcoord/dtype.h"

namespace groupcoord {
namespace cuda {

/// First NCCL version with ncclFloat8e4m3 / ncclFloat8e5m2.
inline constexpr int kNcclFp8Version = 22400;

/// How one buffer travels through NCCL.
struct NcclType {
  ncclDataType_t type;
  /// NCCL elements per tensor element (element size for byte-wise transfers, else 1).
  std::size_t scale;
};

/// Type for data movement of `dtype` (never throws).
NcclType nccl_move_type(DType dtype, int nccl_version);

/// Type and reduction for a sum of `dtype`; std::invalid_argument naming `where` for fp8 on an
/// NCCL without fp8.
struct NcclSum {
  ncclDataType_t type;
  ncclRedOp_t op;
};
NcclSum nccl_sum_type(const comm::OpLabel& where, DType dtype, int nccl_version);

}  // namespace cuda
}  // namespace groupcoord
