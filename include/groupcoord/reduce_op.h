// Reduction operators shared by the process group and the device communicators.
#pragma once

namespace groupcoord {

/// Element-wise reduction applied by all_reduce / reduce_scatter.
enum class ReduceOp { Sum, Min, Max };

/// "sum", "min" or "max".
inline const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
  }
  return "unknown";
}

}  // namespace groupcoord
