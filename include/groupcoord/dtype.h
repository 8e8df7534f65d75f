// Element types. The set and the names follow docs/architecture.md; DLPack codes follow DLPack 1.x
// (Bool and the fp8 codes are newer than the DLPack 0.6 header Debian ships, so they are spelled
// out here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace groupcoord {

/// Element type of a Tensor.
enum class DType {
  Float32,
  Float16,
  BFloat16,
  Float64,
  Int8,
  UInt8,
  Int32,
  Int64,
  Bool,
  Float8E4M3,  ///< e4m3fn (torch.float8_e4m3fn)
  Float8E5M2,  ///< e5m2 (torch.float8_e5m2)
};

/// Number of DType values; handy for iterating over all of them in tests.
inline constexpr int kNumDTypes = 11;

/// All DTypes in declaration order.
const DType* all_dtypes();

/// Size of one element in bytes.
std::size_t dtype_size(DType dtype);
/// Lower-case name as numpy/torch spell it: "float32", "bfloat16", "float8_e4m3fn", "bool", ...
const char* dtype_name(DType dtype);
/// Inverse of dtype_name; also accepts "float"/"half"/"double"/"int"/"long"-style aliases.
/// Throws std::invalid_argument for an unknown name.
DType dtype_from_name(const std::string& name);
/// True for floating types (fp8, fp16, bf16, fp32, fp64).
bool dtype_is_floating(DType dtype);

/// DLPack type (code, bits) for a DType; lanes are always 1.
struct DLPackTypeCode {
  std::uint8_t code;
  std::uint8_t bits;
};
/// DLPack codes used here: Int 0, UInt 1, Float 2, Bfloat 4, Bool 6, Float8_e4m3fn 10,
/// Float8_e5m2 12.
DLPackTypeCode dtype_to_dlpack(DType dtype);
/// Maps a DLPack (code, bits, lanes) to a DType; throws std::invalid_argument for types we do not
/// carry (complex, vector lanes, uint16, ...). Accepts UInt/1-bit-free bool spellings: (Bool, 8).
DType dtype_from_dlpack(std::uint8_t code, std::uint8_t bits, std::uint16_t lanes);

}  // namespace groupcoord
