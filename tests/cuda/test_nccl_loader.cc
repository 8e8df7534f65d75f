// The NCCL loader (src/cuda/nccl/nccl_api.h) and the DType -> NCCL type mapping. No GPU needed:
// these run on every machine that builds the CUDA layer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "cuda/nccl/nccl_api.h"
#include "cuda/nccl/nccl_dtype.h"
#include "groupcoord/check.h"
#include "groupcoord/cuda/runtime.h"
#include "groupcoord/errors.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using testing::ScopedEnv;

// The message of the DistributedError that fn() throws ("" when it throws nothing or another
// type, which fails the test).
template <typename Fn>
std::string distributed_error_of(Fn fn) {
  try {
    fn();
  } catch (const DistributedError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected DistributedError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected DistributedError, nothing was thrown";
  return "";
}

TEST(NcclLoader, LibraryPathComesFromTheEnvironment) {
  {
    ScopedEnv env(cuda::kNcclLibraryEnv, std::nullopt);
    EXPECT_EQ(cuda::nccl_library_path(), "libnccl.so.2");
  }
  {
    ScopedEnv env(cuda::kNcclLibraryEnv, std::string(""));
    EXPECT_EQ(cuda::nccl_library_path(), "libnccl.so.2");
  }
  ScopedEnv env(cuda::kNcclLibraryEnv, std::string("/opt/nccl/lib/libnccl.so.2"));
  EXPECT_EQ(cuda::nccl_library_path(), "/opt/nccl/lib/libnccl.so.2");
}

TEST(NcclLoader, MissingFileIsAClearError) {
  const std::string path = "/nonexistent/groupcoord-test/libnccl.so.2";
  ScopedEnv env(cuda::kNcclLibraryEnv, path);
  const std::string message =
      distributed_error_of([&] { cuda::load_nccl_api(cuda::nccl_library_path()); });
  EXPECT_NE(message.find("cannot load '" + path + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("from GROUPCOORD_NCCL_LIBRARY"), std::string::npos) << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
}

TEST(NcclLoader, EmptyPathIsInvalid) {
  EXPECT_THROW(cuda::load_nccl_api(""), std::invalid_argument);
}

TEST(NcclLoader, ALibraryThatIsNotNcclNamesTheMissingSymbol) {
  const std::string message = distributed_error_of([] { cuda::load_nccl_api("libm.so.6"); });
  EXPECT_NE(message.find("'libm.so.6'"), std::string::npos) << message;
  EXPECT_NE(message.find("has no symbol ncclGetVersion"), std::string::npos) << message;
}

TEST(NcclLoader, LoadsTheNcclThisBuildFound) {
  // GC_TEST_NCCL_LIBRARY is the library CMake found (beside or apart from the nccl.h we compiled
  // against); it loads without a GPU.
  const std::string path = GC_TEST_NCCL_LIBRARY;
  if (!std::ifstream(path).good()) GTEST_SKIP() << path << " is not there any more";
  const cuda::NcclApi api = cuda::load_nccl_api(path);
  EXPECT_GE(api.version, 21400) << "loaded " << api.path;
  std::cout << "[ INFO     ] " << api.path << ": NCCL version " << api.version << ", built against "
            << NCCL_VERSION_CODE << std::endl;
  EXPECT_NE(api.path.find("libnccl"), std::string::npos) << api.path;
  EXPECT_NE(api.AllReduce, nullptr);
  EXPECT_NE(api.CommInitRankConfig, nullptr);
  EXPECT_NE(api.GroupEnd, nullptr);
  EXPECT_NE(std::string(api.GetErrorString(ncclInvalidUsage)), "");
}

TEST(NcclLoader, ProcessWideVersion) {
  // Whatever this machine's loader path or GROUPCOORD_NCCL_LIBRARY picks must be a usable NCCL.
  int version = 0;
  try {
    version = nccl_runtime_version();
  } catch (const DistributedError& e) {
    GTEST_SKIP() << "no NCCL on the loader path here: " << e.what();
  }
  EXPECT_GE(version, 21400);
  EXPECT_EQ(version, cuda::nccl_api().version);
  EXPECT_EQ(&cuda::nccl_api(), &cuda::nccl_api()) << "loaded once";
}

// ---- DType -> NCCL types -------------------------------------------------------------------

const std::string kGroup = "tp:0";
const comm::OpLabel kWhere{kGroup, "all_reduce"};

TEST(NcclTypes, DataMovementCarriesEveryDType) {
  struct Case {
    DType dtype;
    ncclDataType_t type;
    std::size_t scale;
  };
  const Case cases[] = {
      {DType::Float32, ncclFloat32, 1},
      {DType::Float16, ncclFloat16, 1},
      {DType::BFloat16, ncclBfloat16, 1},
      {DType::Float64, ncclFloat64, 1},
      {DType::Int8, ncclInt8, 1},
      {DType::UInt8, ncclUint8, 1},
      {DType::Int32, ncclInt32, 1},
      {DType::Int64, ncclInt64, 1},
      {DType::Bool, ncclUint8, 1},
      {DType::Float8E4M3, ncclFloat8e4m3, 1},
      {DType::Float8E5M2, ncclFloat8e5m2, 1},
  };
  for (const Case& c : cases) {
    const cuda::NcclType t = cuda::nccl_move_type(c.dtype, 22809);
    EXPECT_EQ(t.type, c.type) << dtype_name(c.dtype);
    EXPECT_EQ(t.scale, c.scale) << dtype_name(c.dtype);
  }
  // An NCCL without fp8 types moves fp8 as bytes.
  EXPECT_EQ(cuda::nccl_move_type(DType::Float8E4M3, 22303).type, ncclUint8);
  EXPECT_EQ(cuda::nccl_move_type(DType::Float8E5M2, 22303).type, ncclUint8);
}

TEST(NcclTypes, SumsUseNcclSumAndBoolIsLogicalOr) {
  EXPECT_EQ(cuda::nccl_sum_type(kWhere, DType::Float32, 22809).op, ncclSum);
  EXPECT_EQ(cuda::nccl_sum_type(kWhere, DType::BFloat16, 22809).type, ncclBfloat16);
  EXPECT_EQ(cuda::nccl_sum_type(kWhere, DType::Int64, 22809).type, ncclInt64);
  const cuda::NcclSum b = cuda::nccl_sum_type(kWhere, DType::Bool, 22809);
  EXPECT_EQ(b.type, ncclUint8);
  EXPECT_EQ(b.op, ncclMax);
  EXPECT_EQ(cuda::nccl_sum_type(kWhere, DType::Float8E4M3, 22400).type, ncclFloat8e4m3);
  EXPECT_EQ(cuda::nccl_sum_type(kWhere, DType::Float8E5M2, 22809).type, ncclFloat8e5m2);
}

TEST(NcclTypes, Fp8SumOnAnOldNcclIsInvalid) {
  try {
    cuda::nccl_sum_type(kWhere, DType::Float8E4M3, 22303);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("tp:0 all_reduce"), std::string::npos) << message;
    EXPECT_NE(message.find("float8_e4m3fn"), std::string::npos) << message;
    EXPECT_NE(message.find("2.23.3"), std::string::npos) << message;
    EXPECT_NE(message.find("NCCL >= 2.24"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace groupcoord
