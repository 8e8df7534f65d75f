#include "cuda/nccl/nccl_dtype.h"

#include "groupcoord/check.h"

namespace groupcoord {
namespace cuda {

namespace {

// NCCL's own type for `dtype`, if the loaded version has one; Bool has none.
bool native_type(DType dtype, int nccl_version, ncclDataType_t& type) {
  switch (dtype) {
    case DType::Float32:
      type = ncclFloat32;
      return true;
    case DType::Float16:
      type = ncclFloat16;
      return true;
    case DType::BFloat16:
      type = ncclBfloat16;
      return true;
    case DType::Float64:
      type = ncclFloat64;
      return true;
    case DType::Int8:
      type = ncclInt8;
      return true;
    case DType::UInt8:
      type = ncclUint8;
      return true;
    case DType::Int32:
      type = ncclInt32;
      return true;
    case DType::Int64:
      type = ncclInt64;
      return true;
    case DType::Float8E4M3:
      type = ncclFloat8e4m3;
      return nccl_version >= kNcclFp8Version;
    case DType::Float8E5M2:
      type = ncclFloat8e5m2;
      return nccl_version >= kNcclFp8Version;
    case DType::Bool:
      return false;
  }
  return false;
}

}  // namespace

NcclType nccl_move_type(DType dtype, int nccl_version) {
  ncclDataType_t type = ncclUint8;
  if (native_type(dtype, nccl_version, type)) return {type, 1};
  return {ncclUint8, dtype_size(dtype)};
}

NcclSum nccl_sum_type(const comm::OpLabel& where, DType dtype, int nccl_version) {
  if (dtype == DType::Bool) return {ncclUint8, ncclMax};
  ncclDataType_t type = ncclUint8;
  GC_CHECK(native_type(dtype, nccl_version, type), where, ": summing ", dtype_name(dtype),
           " needs NCCL >= 2.24 (fp8 types), but the loaded NCCL is ", nccl_version / 10000, ".",
           nccl_version / 100 % 100, ".", nccl_version % 100,
           "; set GROUPCOORD_NCCL_LIBRARY to a newer libnccl.so.2");
  return {type, ncclSum};
}

}  // namespace cuda
}  // namespace groupcoord
