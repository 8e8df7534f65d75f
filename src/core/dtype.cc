// DType tables: sizes, names, DLPack codes.
#include "groupcoord/dtype.h"

#include <algorithm>
#include <cctype>

#include "groupcoord/check.h"

namespace groupcoord {
namespace {

// DLPack type codes. 0..5 are in the DLPack 0.6 header; Bool (6) and the fp8 codes (10, 12)
// come from DLPack 1.x and are what numpy and torch emit today.
constexpr std::uint8_t kCodeInt = 0;
constexpr std::uint8_t kCodeUInt = 1;
constexpr std::uint8_t kCodeFloat = 2;
constexpr std::uint8_t kCodeBfloat = 4;
constexpr std::uint8_t kCodeBool = 6;
constexpr std::uint8_t kCodeFloat8E4M3FN = 10;
constexpr std::uint8_t kCodeFloat8E5M2 = 12;

/// One row per DType, in declaration order.
struct DTypeInfo {
  DType dtype;
  const char* name;
  std::size_t size;
  bool floating;
  DLPackTypeCode dlpack;
};

constexpr DTypeInfo kInfo[kNumDTypes] = {
    {DType::Float32, "float32", 4, true, {kCodeFloat, 32}},
    {DType::Float16, "float16", 2, true, {kCodeFloat, 16}},
    {DType::BFloat16, "bfloat16", 2, true, {kCodeBfloat, 16}},
    {DType::Float64, "float64", 8, true, {kCodeFloat, 64}},
    {DType::Int8, "int8", 1, false, {kCodeInt, 8}},
    {DType::UInt8, "uint8", 1, false, {kCodeUInt, 8}},
    {DType::Int32, "int32", 4, false, {kCodeInt, 32}},
    {DType::Int64, "int64", 8, false, {kCodeInt, 64}},
    {DType::Bool, "bool", 1, false, {kCodeBool, 8}},
    {DType::Float8E4M3, "float8_e4m3fn", 1, true, {kCodeFloat8E4M3FN, 8}},
    {DType::Float8E5M2, "float8_e5m2", 1, true, {kCodeFloat8E5M2, 8}},
};

/// info() indexes kInfo by enum value, so the rows must follow the enum's order.
constexpr bool rows_follow_enum_order() {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (static_cast<int>(kInfo[i].dtype) != i) return false;
  }
  return true;
}
static_assert(rows_follow_enum_order(), "kInfo rows must be in DType declaration order");

constexpr DType kAll[kNumDTypes] = {
    DType::Float32, DType::Float16,    DType::BFloat16,   DType::Float64,
    DType::Int8,    DType::UInt8,      DType::Int32,      DType::Int64,
    DType::Bool,    DType::Float8E4M3, DType::Float8E5M2,
};

/// The table row of `dtype`; throws for a value outside the enum (e.g. a bad cast).
const DTypeInfo& info(DType dtype) {
  const int index = static_cast<int>(dtype);
  GC_CHECK(index >= 0 && index < kNumDTypes, "invalid DType value ", index);
  return kInfo[index];
}

/// Other spellings engines and frameworks use for the same types.
struct Alias {
  const char* name;
  DType dtype;
};
constexpr Alias kAliases[] = {
    {"float", DType::Float32},
    {"fp32", DType::Float32},
    {"half", DType::Float16},
    {"fp16", DType::Float16},
    {"bf16", DType::BFloat16},
    {"double", DType::Float64},
    {"fp64", DType::Float64},
    {"int", DType::Int32},
    {"long", DType::Int64},
    {"char", DType::Int8},
    {"byte", DType::UInt8},
    {"bool_", DType::Bool},
    {"float8_e4m3", DType::Float8E4M3},
    {"fp8_e4m3", DType::Float8E4M3},
    {"fp8_e5m2", DType::Float8E5M2},
};

}  // namespace

const DType* all_dtypes() { return kAll; }

std::size_t dtype_size(DType dtype) { return info(dtype).size; }

const char* dtype_name(DType dtype) { return info(dtype).name; }

bool dtype_is_floating(DType dtype) { return info(dtype).floating; }

DType dtype_from_name(const std::string& name) {
  std::string key = name;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // "torch.float16" and "numpy.float16" name the same type as "float16".
  for (const char* prefix : {"torch.", "numpy.", "np."}) {
    const std::string p(prefix);
    if (key.compare(0, p.size(), p) == 0) key.erase(0, p.size());
  }
  for (const DTypeInfo& row : kInfo) {
    if (key == row.name) return row.dtype;
  }
  for (const Alias& alias : kAliases) {
    if (key == alias.name) return alias.dtype;
  }
  GC_THROW(std::invalid_argument, "dtype_from_name: unknown dtype '", name, "'");
}

DLPackTypeCode dtype_to_dlpack(DType dtype) { return info(dtype).dlpack; }

DType dtype_from_dlpack(std::uint8_t code, std::uint8_t bits, std::uint16_t lanes) {
  GC_CHECK(lanes == 1,
           "dtype_from_dlpack: vector types are not supported (code=", static_cast<int>(code),
           ", bits=", static_cast<int>(bits), ", lanes=", lanes, ")");
  for (const DTypeInfo& row : kInfo) {
    if (row.dlpack.code == code && row.dlpack.bits == bits) return row.dtype;
  }
  GC_THROW(std::invalid_argument,
           "dtype_from_dlpack: unsupported DLPack type (code=", static_cast<int>(code),
           ", bits=", static_cast<int>(bits), ", lanes=", lanes,
           "); supported: int8/32/64, uint8, float16/32/64, bfloat16, bool, float8_e4m3fn, "
           "float8_e5m2");
}

}  // namespace groupcoord
