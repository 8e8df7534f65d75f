// NCCL symmetric memory: the decisions that need no GPU (they run in CI). Settings from the
// environment, the refusal reasons, vLLM's all_reduce table, the scratch layout and growth, and
// the deterministic block allocator behind symmetric_empty.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nccl.h>

#include "cuda/symmetric/symmetric_block_allocator.h"
#include "cuda/symmetric/symmetric_config.h"
#include "cuda/symmetric/symmetric_scratch_layout.h"
#include "test_support.h"

namespace groupcoord {
namespace cuda {
namespace {

constexpr const char* kVariables[] = {
    "GROUPCOORD_USE_NCCL_SYMM_MEM",  "GROUPCOORD_BATCH_INVARIANT",
    "GROUPCOORD_SYMM_SCRATCH_BYTES", "GROUPCOORD_SYMM_SCRATCH_MAX_BYTES",
    "GROUPCOORD_SYMM_POOL_BYTES",    "GROUPCOORD_SYMM_ALL_REDUCE",
    "GROUPCOORD_SYMM_WINDOW_FLAGS",  "NCCL_CUMEM_ENABLE"};

// Clears the variables for a test and restores them afterwards.
class SymmetricSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      cleared_.push_back(std::make_unique<groupcoord::testing::ScopedEnv>(name, std::nullopt));
    }
  }
  void TearDown() override { cleared_.clear(); }
  std::vector<std::unique_ptr<groupcoord::testing::ScopedEnv>> cleared_;
};

SymmetricCapabilities capable() {
  SymmetricCapabilities caps;
  caps.nccl_version = 22809;
  caps.has_window_api = true;
  caps.cumem_supported = true;
  return caps;
}

TEST_F(SymmetricSettingsTest, DefaultsAreOffWithReason) {
  const SymmetricSettings s = read_symmetric_settings();
  EXPECT_FALSE(s.requested);
  EXPECT_EQ(s.scratch_bytes, 64ll << 20);
  EXPECT_EQ(s.scratch_max_bytes, 1ll << 30);
  EXPECT_EQ(s.all_reduce, AllReduceRouting::Table);
  EXPECT_NE(symmetric_refusal(s, capable()).find("GROUPCOORD_USE_NCCL_SYMM_MEM"),
            std::string::npos);
}

TEST_F(SymmetricSettingsTest, ReadsEveryVariable) {
  setenv("GROUPCOORD_USE_NCCL_SYMM_MEM", "1", 1);
  setenv("GROUPCOORD_SYMM_SCRATCH_BYTES", "1048576", 1);
  setenv("GROUPCOORD_SYMM_SCRATCH_MAX_BYTES", "4194304", 1);
  setenv("GROUPCOORD_SYMM_POOL_BYTES", "2097152", 1);
  setenv("GROUPCOORD_SYMM_ALL_REDUCE", "always", 1);
  setenv("GROUPCOORD_SYMM_WINDOW_FLAGS", "default", 1);
  const SymmetricSettings s = read_symmetric_settings();
  EXPECT_EQ(s.window_flags, NCCL_WIN_DEFAULT);
  EXPECT_TRUE(s.requested);
  EXPECT_EQ(s.scratch_bytes, 1048576);
  EXPECT_EQ(s.scratch_max_bytes, 4194304);
  EXPECT_EQ(s.pool_bytes, 2097152);
  EXPECT_EQ(s.all_reduce, AllReduceRouting::Always);
  EXPECT_EQ(symmetric_refusal(s, capable()), "");
}

TEST_F(SymmetricSettingsTest, BadValuesNameTheVariable) {
  const std::pair<const char*, const char*> bad[] = {
      {"GROUPCOORD_SYMM_SCRATCH_BYTES", "lots"},    {"GROUPCOORD_SYMM_SCRATCH_BYTES", "0"},
      {"GROUPCOORD_SYMM_POOL_BYTES", "-5"},         {"GROUPCOORD_SYMM_ALL_REDUCE", "sometimes"},
      {"GROUPCOORD_SYMM_SCRATCH_MAX_BYTES", "12x"}, {"GROUPCOORD_SYMM_WINDOW_FLAGS", "fast"}};
  for (const auto& [name, value] : bad) {
    SCOPED_TRACE(std::string(name) + "=" + value);
    setenv(name, value, 1);
    try {
      read_symmetric_settings();
      ADD_FAILURE() << "no error";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
    unsetenv(name);
  }
  setenv("GROUPCOORD_SYMM_SCRATCH_BYTES", "4194304", 1);
  setenv("GROUPCOORD_SYMM_SCRATCH_MAX_BYTES", "1048576", 1);
  EXPECT_THROW(read_symmetric_settings(), std::invalid_argument);  // first above the limit
}

TEST_F(SymmetricSettingsTest, RefusalReasons) {
  setenv("GROUPCOORD_USE_NCCL_SYMM_MEM", "1", 1);
  SymmetricSettings s = read_symmetric_settings();
  SymmetricCapabilities old = capable();
  old.nccl_version = 22803;  // the GPU host's system NCCL: broken symmetric kernels
  EXPECT_NE(symmetric_refusal(s, old).find("2.28.3"), std::string::npos);
  EXPECT_NE(symmetric_refusal(s, old).find("2.28.7"), std::string::npos);
  old.nccl_version = 22807;
  EXPECT_EQ(symmetric_refusal(s, old), "");
  SymmetricCapabilities no_api = capable();
  no_api.has_window_api = false;
  EXPECT_NE(symmetric_refusal(s, no_api).find("ncclCommWindowRegister"), std::string::npos);
  SymmetricCapabilities no_kernels = capable();  // the H200 host's torch NCCL 2.28.9 wheel
  no_kernels.window_probe = "ncclCommWindowRegister failed: ncclUnhandledCudaError";
  EXPECT_EQ(s.window_flags, NCCL_WIN_COLL_SYMMETRIC);
  const std::string why = symmetric_refusal(s, no_kernels);
  EXPECT_NE(why.find("symmetric window"), std::string::npos) << why;
  EXPECT_NE(why.find("ncclUnhandledCudaError"), std::string::npos) << why;
  EXPECT_NE(why.find("GROUPCOORD_SYMM_WINDOW_FLAGS=default"), std::string::npos) << why;
  SymmetricCapabilities no_cumem = capable();
  no_cumem.cumem_supported = false;
  EXPECT_NE(symmetric_refusal(s, no_cumem).find("cuMem"), std::string::npos);

  setenv("NCCL_CUMEM_ENABLE", "0", 1);
  EXPECT_NE(symmetric_refusal(read_symmetric_settings(), capable()).find("NCCL_CUMEM_ENABLE"),
            std::string::npos);
  unsetenv("NCCL_CUMEM_ENABLE");
  setenv("GROUPCOORD_BATCH_INVARIANT", "1", 1);
  EXPECT_NE(symmetric_refusal(read_symmetric_settings(), capable()).find("BATCH_INVARIANT"),
            std::string::npos);
}

TEST(SymmetricRouting, AllReduceTableFollowsVllm) {
  constexpr std::int64_t KiB = 1024;
  const AllReduceRouting t = AllReduceRouting::Table;
  for (int ws : {1, 2, 3}) EXPECT_FALSE(all_reduce_takes_symmetric_path(t, ws, 1 << 30)) << ws;
  EXPECT_TRUE(all_reduce_takes_symmetric_path(t, 4, 16 * KiB));
  EXPECT_FALSE(all_reduce_takes_symmetric_path(t, 4, 16 * KiB + 1));
  EXPECT_FALSE(all_reduce_takes_symmetric_path(t, 4, 512 * KiB - 1));
  EXPECT_TRUE(all_reduce_takes_symmetric_path(t, 4, 512 * KiB));
  EXPECT_TRUE(all_reduce_takes_symmetric_path(t, 8, 16 * KiB));
  EXPECT_FALSE(all_reduce_takes_symmetric_path(t, 8, 64 * KiB));
  EXPECT_TRUE(all_reduce_takes_symmetric_path(t, 8, 128 * KiB));
  EXPECT_FALSE(all_reduce_takes_symmetric_path(t, 6, 1 << 20));
  EXPECT_TRUE(all_reduce_takes_symmetric_path(t, 16, 100 * KiB));
  EXPECT_TRUE(all_reduce_takes_symmetric_path(AllReduceRouting::Always, 2, 100));
  EXPECT_FALSE(all_reduce_takes_symmetric_path(AllReduceRouting::Never, 16, 100));
}

TEST(SymmetricRouting, ReductionDtypesAreTheKernels) {
  for (DType d :
       {DType::Float32, DType::Float16, DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2}) {
    EXPECT_TRUE(symmetric_reduction_dtype(d)) << dtype_name(d);
  }
  for (DType d :
       {DType::Float64, DType::Int8, DType::UInt8, DType::Int32, DType::Int64, DType::Bool}) {
    EXPECT_FALSE(symmetric_reduction_dtype(d)) << dtype_name(d);
  }
}

TEST(SymmetricScratch, LayoutsKeepRegionsApart) {
  // all_gather: in place, the input in this rank's slot of the output.
  const ScratchLayout ag = all_gather_layout(1000, 4, 3, false);
  EXPECT_EQ(ag.output_offset, 0u);
  EXPECT_EQ(ag.input_offset, 3000u);
  EXPECT_EQ(ag.bytes_needed, 4000u);
  EXPECT_EQ(all_gather_layout(1000, 4, 3, true).bytes_needed, 4000u);
  // reduce_scatter: input region, then the output region at an aligned offset past it.
  const ScratchLayout rs = reduce_scatter_layout(1000, 4, false);
  EXPECT_EQ(rs.input_offset, 0u);
  EXPECT_EQ(rs.output_offset, 4096u);
  EXPECT_EQ(rs.bytes_needed, 5096u);
  EXPECT_EQ(reduce_scatter_layout(1000, 4, true).bytes_needed, 5096u) << "same as without";
  EXPECT_EQ(all_reduce_layout(777, false).bytes_needed, 777u);
}

TEST(SymmetricScratch, GrowsGeometricallyUpToTheLimit) {
  constexpr std::size_t MiB = 1 << 20;
  EXPECT_EQ(scratch_size_for(0, 10, 64 * MiB, 1024 * MiB), 64 * MiB);  // first: initial
  EXPECT_EQ(scratch_size_for(0, 0, 64 * MiB, 1024 * MiB), 64 * MiB);   // never 0 bytes
  EXPECT_EQ(scratch_size_for(64 * MiB, 64 * MiB, 64 * MiB, 1024 * MiB), 64 * MiB);  // fits
  EXPECT_EQ(scratch_size_for(64 * MiB, 65 * MiB, 64 * MiB, 1024 * MiB), 128 * MiB);
  EXPECT_EQ(scratch_size_for(64 * MiB, 300 * MiB + 1, 64 * MiB, 1024 * MiB), 302 * MiB);
  EXPECT_EQ(scratch_size_for(600 * MiB, 700 * MiB, 64 * MiB, 1024 * MiB), 1024 * MiB);
  EXPECT_EQ(scratch_size_for(64 * MiB, 1025 * MiB, 64 * MiB, 1024 * MiB), std::nullopt);
}

TEST(SymmetricBlockAllocator, FirstFitMergesAndIsDeterministic) {
  SymmetricBlockAllocator a;
  EXPECT_FALSE(a.allocate(1).has_value());  // no segment yet
  a.add_segment(4096);
  const auto b0 = a.allocate(100);  // one unit of 256
  const auto b1 = a.allocate(300);  // two units
  const auto b2 = a.allocate(256);
  ASSERT_TRUE(b0 && b1 && b2);
  EXPECT_EQ(b0->offset, 0u);
  EXPECT_EQ(b1->offset, 256u);
  EXPECT_EQ(b2->offset, 768u);
  EXPECT_EQ(b1->size, 512u);
  EXPECT_EQ(b2->id, 2);
  a.release(b1->id);
  const auto b3 = a.allocate(200);  // first fit: b1's old place
  ASSERT_TRUE(b3);
  EXPECT_EQ(b3->offset, 256u);
  a.release(b0->id);
  a.release(b3->id);
  a.release(b2->id);
  EXPECT_EQ(a.free_bytes(0), 4096u);  // everything merged back
  EXPECT_EQ(a.allocate(4096)->offset, 0u);
  EXPECT_FALSE(a.allocate(1).has_value());
  a.add_segment(8192);
  const auto b5 = a.allocate(5000);
  ASSERT_TRUE(b5);
  EXPECT_EQ(b5->segment, 1);
  EXPECT_THROW(a.release(12345), std::invalid_argument);

  // Two allocators fed the same calls agree on every offset (what ranks rely on).
  SymmetricBlockAllocator x, y;
  for (auto* alloc : {&x, &y}) alloc->add_segment(1 << 16);
  for (int i = 0; i < 50; ++i) {
    const auto bx = x.allocate(37 * i + 1);
    const auto by = y.allocate(37 * i + 1);
    ASSERT_EQ(bx.has_value(), by.has_value());
    if (!bx) continue;
    EXPECT_EQ(bx->offset, by->offset);
    if (i % 3 == 0) {
      x.release(bx->id);
      y.release(by->id);
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace groupcoord
