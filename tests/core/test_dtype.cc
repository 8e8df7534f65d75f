// DType tables and Device names against hand-written expectations.
#include "groupcoord/dtype.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "groupcoord/device.h"

namespace groupcoord {
namespace {

/// The expected row of each DType, written out by hand from numpy/torch and DLPack 1.x.
struct Expected {
  DType dtype;
  const char* name;
  std::size_t size;
  bool floating;
  int code;
  int bits;
};

const Expected kExpected[] = {
    {DType::Float32, "float32", 4, true, 2, 32},
    {DType::Float16, "float16", 2, true, 2, 16},
    {DType::BFloat16, "bfloat16", 2, true, 4, 16},
    {DType::Float64, "float64", 8, true, 2, 64},
    {DType::Int8, "int8", 1, false, 0, 8},
    {DType::UInt8, "uint8", 1, false, 1, 8},
    {DType::Int32, "int32", 4, false, 0, 32},
    {DType::Int64, "int64", 8, false, 0, 64},
    {DType::Bool, "bool", 1, false, 6, 8},
    {DType::Float8E4M3, "float8_e4m3fn", 1, true, 10, 8},
    {DType::Float8E5M2, "float8_e5m2", 1, true, 12, 8},
};

TEST(DType, TableMatchesHandWrittenExpectations) {
  ASSERT_EQ(sizeof(kExpected) / sizeof(kExpected[0]), static_cast<std::size_t>(kNumDTypes));
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(dtype_size(e.dtype), e.size);
    EXPECT_STREQ(dtype_name(e.dtype), e.name);
    EXPECT_EQ(dtype_is_floating(e.dtype), e.floating);
    EXPECT_EQ(dtype_from_name(e.name), e.dtype);
    const DLPackTypeCode code = dtype_to_dlpack(e.dtype);
    EXPECT_EQ(code.code, e.code);
    EXPECT_EQ(code.bits, e.bits);
    EXPECT_EQ(
        dtype_from_dlpack(static_cast<std::uint8_t>(e.code), static_cast<std::uint8_t>(e.bits), 1),
        e.dtype);
  }
}

TEST(DType, AllDTypesListsEachOnceInOrder) {
  const DType* all = all_dtypes();
  std::set<DType> seen;
  for (int i = 0; i < kNumDTypes; ++i) {
    EXPECT_EQ(all[i], kExpected[i].dtype);
    seen.insert(all[i]);
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kNumDTypes));
}

TEST(DType, NameAliases) {
  EXPECT_EQ(dtype_from_name("float"), DType::Float32);
  EXPECT_EQ(dtype_from_name("half"), DType::Float16);
  EXPECT_EQ(dtype_from_name("double"), DType::Float64);
  EXPECT_EQ(dtype_from_name("int"), DType::Int32);
  EXPECT_EQ(dtype_from_name("long"), DType::Int64);
  EXPECT_EQ(dtype_from_name("bf16"), DType::BFloat16);
  EXPECT_EQ(dtype_from_name("torch.float16"), DType::Float16);
  EXPECT_EQ(dtype_from_name("BFloat16"), DType::BFloat16);
  EXPECT_EQ(dtype_from_name("torch.float8_e4m3fn"), DType::Float8E4M3);
}

TEST(DType, UnknownNameThrows) {
  EXPECT_THROW(dtype_from_name("complex64"), std::invalid_argument);
  EXPECT_THROW(dtype_from_name(""), std::invalid_argument);
  EXPECT_THROW(dtype_from_name("float33"), std::invalid_argument);
  try {
    dtype_from_name("int3");
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("int3"), std::string::npos) << e.what();
  }
}

TEST(DType, UnsupportedDLPackTypesThrow) {
  EXPECT_THROW(dtype_from_dlpack(5, 64, 1), std::invalid_argument);   // complex64
  EXPECT_THROW(dtype_from_dlpack(5, 128, 1), std::invalid_argument);  // complex128
  EXPECT_THROW(dtype_from_dlpack(2, 32, 4), std::invalid_argument);   // float4 vector
  EXPECT_THROW(dtype_from_dlpack(2, 32, 0), std::invalid_argument);
  EXPECT_THROW(dtype_from_dlpack(1, 16, 1), std::invalid_argument);  // uint16
  EXPECT_THROW(dtype_from_dlpack(0, 16, 1), std::invalid_argument);  // int16
  EXPECT_THROW(dtype_from_dlpack(3, 64, 1), std::invalid_argument);  // opaque handle
  EXPECT_THROW(dtype_from_dlpack(6, 1, 1), std::invalid_argument);   // 1-bit bool
  EXPECT_THROW(dtype_from_dlpack(2, 8, 1), std::invalid_argument);   // "float8" without kind
  EXPECT_THROW(dtype_from_dlpack(11, 8, 1), std::invalid_argument);  // e4m3fnuz
  try {
    dtype_from_dlpack(5, 64, 1);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("code=5"), std::string::npos) << e.what();
  }
}

TEST(DType, InvalidEnumValueThrows) {
  EXPECT_THROW(dtype_size(static_cast<DType>(99)), std::invalid_argument);
  EXPECT_THROW(dtype_name(static_cast<DType>(-1)), std::invalid_argument);
}

TEST(Device, StrAndEquality) {
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_EQ(Device::cuda(0).str(), "cuda:0");
  EXPECT_EQ(Device::cuda(3).str(), "cuda:3");
  EXPECT_EQ(Device::cpu(), (Device{DeviceType::CPU, 5}));
  EXPECT_NE(Device::cuda(0), Device::cuda(1));
  EXPECT_NE(Device::cuda(0), Device::cpu());
}

}  // namespace
}  // namespace groupcoord
