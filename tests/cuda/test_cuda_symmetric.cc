// NCCL symmetric memory on the "cuda" communicator (issue: one registered scratch window per
// communicator). Run at 1 and 2 ranks; on the single-GPU host the two ranks share the GPU through
// NCCL_HOSTID, where NCCL registers windows but never picks symmetric kernels, so these tests
// check the bookkeeping and the results, not the kernels (NCCL_DEBUG_SUBSYS=TUNING shows those on
// a multi-GPU host). Every communicator here is built for its test with the environment the test
// needs; references are values every rank computes, or the regular path of another communicator.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cuda/symmetric_allocation.h"
#include "cuda_fixture.h"
#include "groupcoord/cuda/graph_capture.h"
#include "groupcoord/cuda/stream.h"
#include "groupcoord/half.h"

namespace groupcoord {
namespace testing {
namespace {

using Env = std::map<std::string, std::string>;

// Sets `vars` for the scope (an empty value unsets), restoring them afterwards.
class EnvScope {
 public:
  explicit EnvScope(const Env& vars) {
    for (const auto& [name, value] : vars) {
      guards_.push_back(std::make_unique<ScopedEnv>(
          name, value.empty() ? std::nullopt : std::optional<std::string>(value)));
    }
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> guards_;
};

// On, with all_reduce forced through the window (the table never routes below 4 ranks).
const Env kOn = {{"GROUPCOORD_USE_NCCL_SYMM_MEM", "1"}, {"GROUPCOORD_SYMM_ALL_REDUCE", "always"},
                 {"GROUPCOORD_BATCH_INVARIANT", ""}};
const Env kOff = {{"GROUPCOORD_USE_NCCL_SYMM_MEM", ""}};

class CudaSymmetric : public CudaCommTest {
 protected:
  std::unique_ptr<CudaCommunicator> make(const std::string& name, const Env& env) {
    EnvScope scoped(env);
    return make_communicator(name, std::chrono::seconds(60));
  }
  // Skips (on every rank alike) when the path is off for a reason outside the test's control.
  void require_enabled(const CudaCommunicator& c) {
    const SymmetricMemoryStats s = c.symmetric_memory_stats();
    if (!s.enabled) GTEST_SKIP() << "symmetric memory unavailable here: " << s.disabled_reason;
  }
  // Element i of group rank r's input: small integers, exact in f32 and bf16, sums too.
  static double f(int r, std::int64_t i) { return r * 3 + i % 5; }
};

// ---- bookkeeping ---------------------------------------------------------------------------------

TEST_F(CudaSymmetric, ThousandMixedCallsRegisterOnce) {
  auto c = make("symm-mixed", kOn);
  require_enabled(*c);
  const int r = c->rank_in_group(), n = c->world_size();
  const std::vector<std::int64_t> uniform(n, 0);
  for (int call = 0; call < 1000; ++call) {
    const std::int64_t rows = 1 + call % 7, cols = 8 + (call * 37) % 2048;
    const DType dtype = call % 2 ? DType::BFloat16 : DType::Float32;
    const Tensor x = device_tensor({rows * n, cols}, dtype, device(),
                                   [&](std::int64_t i) { return f(r, i + call); });
    SCOPED_TRACE("call " + std::to_string(call));
    std::vector<double> got;
    switch (call % 5) {
      case 0:
      case 1: {  // all_gather, all_gatherv with uniform sizes (normalised to none)
        const Tensor out = call % 5 == 0
            ? c->all_gather(x, 0)
            : c->all_gatherv(std::vector<Tensor>{x}, 0,
                             std::vector<std::int64_t>(n, rows * n))[0];
        got = host_values(out);
        const std::int64_t per = rows * n * cols;
        ASSERT_EQ(static_cast<std::int64_t>(got.size()), per * n);
        for (std::int64_t i = 0; i < per * n; ++i) {
          ASSERT_EQ(got[i], f(static_cast<int>(i / per), i % per + call)) << i;
        }
        break;
      }
      case 2:
      case 3: {  // reduce_scatter, reduce_scatterv with uniform sizes
        const Tensor out = call % 5 == 2
            ? c->reduce_scatter(x, 0)
            : c->reduce_scatterv(x, 0, std::vector<std::int64_t>(n, rows));
        got = host_values(out);
        const std::int64_t per = rows * cols;
        ASSERT_EQ(static_cast<std::int64_t>(got.size()), per);
        for (std::int64_t i = 0; i < per; ++i) {
          double sum = 0;
          for (int q = 0; q < n; ++q) sum += f(q, r * per + i + call);
          ASSERT_EQ(got[i], sum) << i;
        }
        break;
      }
      default: {
        got = host_values(c->all_reduce(x));
        for (std::int64_t i = 0; i < x.numel(); ++i) {
          double sum = 0;
          for (int q = 0; q < n; ++q) sum += f(q, i + call);
          ASSERT_EQ(got[i], sum) << i;
        }
      }
    }
  }
  const SymmetricMemoryStats s = c->symmetric_memory_stats();
  EXPECT_EQ(s.windows_registered, 1) << "one scratch window for the whole run";
  EXPECT_EQ(s.symmetric_calls, 1000);
  EXPECT_EQ(s.fallbacks, 0);
  EXPECT_EQ(s.scratch_bytes, 64 << 20);
  c->destroy();
}

TEST_F(CudaSymmetric, CommunicatorsOverTheSameMemoryRegisterItOnceEach) {
  auto a = make("symm-a", kOn);
  auto b = make("symm-b", kOn);
  require_enabled(*a);
  auto memory = cuda::SymmetricAllocation::allocate(cuda::nccl_api(), device(), 4 << 20, "test");
  cuda::SymmetricMemory& sa = a->nccl_comm().symmetric();
  cuda::SymmetricMemory& sb = b->nccl_comm().symmetric();
  sa.register_allocation(memory, "test");
  sa.register_allocation(memory, "test");  // the same base again: no second registration
  sb.register_allocation(memory, "test");
  sa.register_allocation(memory, "test");
  EXPECT_EQ(a->symmetric_memory_stats().windows_registered, 1);
  EXPECT_EQ(b->symmetric_memory_stats().windows_registered, 1);
  // The scratch is each communicator's own window.
  const Tensor x = device_floats({1024}, device(), [&](std::int64_t i) { return i; });
  host_values(a->all_gather(x, 0));
  host_values(b->all_gather(x, 0));
  EXPECT_EQ(a->symmetric_memory_stats().windows_registered, 2);
  EXPECT_EQ(b->symmetric_memory_stats().windows_registered, 2);
  a->destroy();
  b->destroy();  // deregisters; the memory is freed after, with the last reference
}

TEST_F(CudaSymmetric, ResultsNeverAliasTheScratch) {
  auto c = make("symm-alias", kOn);
  require_enabled(*c);
  const int r = c->rank_in_group(), n = c->world_size();
  const Tensor x1 = device_floats({4096}, device(), [&](std::int64_t i) { return f(r, i); });
  const Tensor x2 = device_floats({4096}, device(), [&](std::int64_t i) { return f(r, i + 1); });
  const Tensor o1 = c->all_gather(x1, 0);
  const Tensor o2 = c->all_gather(x2, 0);
  EXPECT_NE(o1.data_ptr(), o2.data_ptr());
  const std::vector<double> g1 = host_values(o1), g2 = host_values(o2);
  for (std::int64_t i = 0; i < 4096 * n; ++i) {
    ASSERT_EQ(g1[i], f(static_cast<int>(i / 4096), i % 4096)) << "first result, " << i;
    ASSERT_EQ(g2[i], f(static_cast<int>(i / 4096), i % 4096 + 1)) << "second result, " << i;
  }
  c->destroy();
}

// ---- against the regular path (vLLM's test_nccl_symm_mem: bf16 randint(1, 23), 4M elements) ----

TEST_F(CudaSymmetric, MatchesTheRegularPathOnBf16) {
  auto symm = make("symm-bf16", kOn);
  auto plain = make("plain-bf16", kOff);
  require_enabled(*symm);
  EXPECT_FALSE(plain->symmetric_memory_stats().enabled);
  const int r = symm->rank_in_group(), n = symm->world_size();
  constexpr std::int64_t kCount = 4 << 20;
  std::uint64_t state = 0x9E3779B97F4A7C15ull * (r + 1);
  const Tensor x = device_tensor({kCount}, DType::BFloat16, device(), [&](std::int64_t) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(1 + (state >> 33) % 22);  // randint(1, 23)
  });
  auto close = [](const std::vector<double>& got, const std::vector<double>& want,
                  const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_LE(std::fabs(got[i] - want[i]), 2.5 + 0.1 * std::fabs(want[i])) << what << " " << i;
    }
  };
  EXPECT_EQ(host_values(symm->all_gather(x, 0)), host_values(plain->all_gather(x, 0)))
      << "all_gather is exact";
  close(host_values(symm->reduce_scatter(x, 0)), host_values(plain->reduce_scatter(x, 0)),
        "reduce_scatter");
  close(host_values(symm->all_reduce(x)), host_values(plain->all_reduce(x)), "all_reduce");
  const SymmetricMemoryStats s = symm->symmetric_memory_stats();
  EXPECT_EQ(s.symmetric_calls, 3);
  EXPECT_EQ(s.windows_registered, 1);
  EXPECT_EQ(plain->symmetric_memory_stats().symmetric_calls, 0);
  (void)n;
  symm->destroy();
  plain->destroy();
}

// ---- CUDA graphs -----------------------------------------------------------------------------

TEST_F(CudaSymmetric, CapturedCallsReplayAndRegisterNothing) {
  auto c = make("symm-graph", kOn);
  require_enabled(*c);
  const int r = c->rank_in_group(), n = c->world_size();
  constexpr std::int64_t kCount = 2048;
  const Tensor x = device_floats({kCount * n}, device(), [&](std::int64_t i) { return f(r, i); });
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  GraphCaptureContext context(device());
  cudaStream_t stream = context.stream();
  host_values(c->all_gather(x, 0));  // warm-up: connects and allocates the scratch
  const SymmetricMemoryStats before = c->symmetric_memory_stats();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  Tensor ag = c->all_gather(x, 0);
  Tensor rs = c->reduce_scatter(x, 0);
  Tensor ar = c->all_reduce(x);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  const SymmetricMemoryStats during = c->symmetric_memory_stats();
  EXPECT_EQ(during.windows_registered, before.windows_registered) << "nothing registers in capture";
  EXPECT_EQ(during.symmetric_calls, before.symmetric_calls + 3);
  EXPECT_EQ(during.fallbacks, 0);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch),
            cudaSuccess);
  for (int replay = 1; replay <= 3; ++replay) {
    std::vector<float> host(kCount * n);
    for (std::int64_t i = 0; i < kCount * n; ++i) host[i] = static_cast<float>(f(r, i) * replay);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(x.data_ptr(), host.data(), host.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    const std::vector<double> g = host_values(ag), s = host_values(rs), a = host_values(ar);
    for (std::int64_t i = 0; i < kCount * n * n; ++i) {
      ASSERT_EQ(g[i], replay * f(static_cast<int>(i / (kCount * n)), i % (kCount * n))) << i;
    }
    for (std::int64_t i = 0; i < kCount * n; ++i) {
      double sum = 0;
      for (int q = 0; q < n; ++q) sum += f(q, i);
      ASSERT_EQ(a[i], replay * sum) << "all_reduce " << i;
      if (i < kCount) {
        double part = 0;
        for (int q = 0; q < n; ++q) part += f(q, r * kCount + i);
        ASSERT_EQ(s[i], replay * part) << "reduce_scatter " << i;
      }
    }
  }
  ag = rs = ar = Tensor();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  c->destroy();
}

TEST_F(CudaSymmetric, TooSmallScratchFallsBackInCaptureAndGrowsOutside) {
  Env env = kOn;
  env["GROUPCOORD_SYMM_SCRATCH_BYTES"] = std::to_string(2 << 20);
  auto c = make("symm-grow", env);
  require_enabled(*c);
  const int r = c->rank_in_group(), n = c->world_size();
  const Tensor small = device_floats({1024}, device(), [&](std::int64_t i) { return f(r, i); });
  host_values(c->all_gather(small, 0));  // allocates the 2 MiB scratch
  EXPECT_EQ(c->symmetric_memory_stats().scratch_bytes, 2 << 20);
  constexpr std::int64_t kBig = 1 << 20;  // 4 MiB per rank: the gathered output does not fit
  const Tensor big = device_floats({kBig}, device(), [&](std::int64_t i) { return f(r, i); });
  auto check_big = [&](const Tensor& out) {
    const std::vector<double> g = host_values(out);
    for (std::int64_t i = 0; i < kBig * n; i += 997) {
      ASSERT_EQ(g[i], f(static_cast<int>(i / kBig), i % kBig)) << i;
    }
  };
  {
    GraphCaptureContext context(device());
    cudaStream_t stream = context.stream();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    Tensor out = c->all_gather(big, 0);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    const SymmetricMemoryStats s = c->symmetric_memory_stats();
    EXPECT_EQ(s.fallbacks, 1);
    EXPECT_EQ(s.windows_registered, 1);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch),
              cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    check_big(out);
    out = Tensor();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  check_big(c->all_gather(big, 0));  // outside capture: the scratch grows, collectively
  const SymmetricMemoryStats s = c->symmetric_memory_stats();
  EXPECT_EQ(s.windows_registered, 2);
  EXPECT_GE(s.scratch_bytes, 4 * kBig * n);
  EXPECT_EQ(s.fallbacks, 1);
  c->destroy();
}

// ---- symmetric_empty ---------------------------------------------------------------------------

TEST_F(CudaSymmetric, SymmetricEmptyIsZeroCopyAndReused) {
  auto c = make("symm-empty", kOn);
  require_enabled(*c);
  const int r = c->rank_in_group(), n = c->world_size();
  constexpr std::int64_t kCount = 4096;
  auto fill = [&](Tensor& t, int shift) {
    std::vector<float> host(t.numel());
    for (std::int64_t i = 0; i < t.numel(); ++i) host[i] = static_cast<float>(f(r, i + shift));
    ASSERT_EQ(cudaMemcpy(t.data_ptr(), host.data(), host.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
  };
  void* first = nullptr;
  {
    Tensor t = c->symmetric_empty({kCount * n}, DType::Float32);
    first = t.data_ptr();
    fill(t, 0);
    const SymmetricMemoryStats before = c->symmetric_memory_stats();
    EXPECT_GT(before.pool_bytes, 0);
    const std::vector<double> g = host_values(c->all_gather(t, 0));
    const std::vector<double> s = host_values(c->reduce_scatter(t, 0));
    const std::vector<double> a = host_values(c->all_reduce(t));
    const SymmetricMemoryStats after = c->symmetric_memory_stats();
    EXPECT_EQ(after.zero_copy_calls, before.zero_copy_calls + 3);
    for (std::int64_t i = 0; i < kCount * n * n; ++i) {
      ASSERT_EQ(g[i], f(static_cast<int>(i / (kCount * n)), i % (kCount * n))) << i;
    }
    for (std::int64_t i = 0; i < kCount; ++i) {
      double part = 0;
      for (int q = 0; q < n; ++q) part += f(q, r * kCount + i);
      ASSERT_EQ(s[i], part) << i;
    }
    double sum0 = 0;
    for (int q = 0; q < n; ++q) sum0 += f(q, 0);
    EXPECT_EQ(a[0], sum0);
  }  // t dies on every rank: its block is given back
  const SymmetricMemoryStats mid = c->symmetric_memory_stats();
  Tensor again = c->symmetric_empty({kCount * n}, DType::Float32);
  EXPECT_EQ(again.data_ptr(), first) << "the block every rank gave back is reused";
  EXPECT_EQ(c->symmetric_memory_stats().windows_registered, mid.windows_registered);
  EXPECT_EQ(c->symmetric_memory_stats().pool_bytes, mid.pool_bytes);
  // A strided view of a pool tensor is not zero-copy, but still correct.
  fill(again, 0);
  const SymmetricMemoryStats pre = c->symmetric_memory_stats();
  const Tensor view = again.reshape({2, kCount * n / 2}).movedim(0, 1);  // strides (1, k n / 2)
  ASSERT_FALSE(view.is_contiguous());
  host_values(c->all_reduce(view));
  EXPECT_EQ(c->symmetric_memory_stats().zero_copy_calls, pre.zero_copy_calls);
  if (n > 1) {
    expect_invalid_argument([&] { c->symmetric_empty({100 + r}, DType::Float32); },
                   {"symm-empty", "symmetric_empty", "same shape and dtype"});
  }
  again = Tensor();
  c->destroy();
}

// ---- off switches -------------------------------------------------------------------------------

// Asked for but refused (an old NCCL, no cuMem, or an NCCL that cannot register the windows on
// this GPU): the reason is reported and the communicator works on the regular path, unharmed.
TEST_F(CudaSymmetric, RefusedRequestLeavesTheRegularPath) {
  auto c = make("symm-asked", kOn);
  const SymmetricMemoryStats s = c->symmetric_memory_stats();
  std::printf("[symmetric] requested: enabled=%d windows=%s reason='%s'\n", s.enabled ? 1 : 0,
              s.window_kind.c_str(), s.disabled_reason.c_str());
  const int r = c->rank_in_group(), n = c->world_size();
  const Tensor x = device_floats({512}, device(), [&](std::int64_t i) { return f(r, i); });
  const std::vector<double> g = host_values(c->all_gather(x, 0));
  for (std::int64_t i = 0; i < 512 * n; ++i) ASSERT_EQ(g[i], f(static_cast<int>(i / 512), i % 512));
  if (!s.enabled) {
    EXPECT_FALSE(s.disabled_reason.empty());
    EXPECT_EQ(c->symmetric_memory_stats().symmetric_calls, 0);
  }
  c->destroy();
}

TEST_F(CudaSymmetric, OffWhenNotRequestedOrBatchInvariant) {
  auto off = make("symm-off", kOff);
  Env invariant = kOn;
  invariant["GROUPCOORD_BATCH_INVARIANT"] = "1";
  auto inv = make("symm-invariant", invariant);
  const SymmetricMemoryStats a = off->symmetric_memory_stats();
  const SymmetricMemoryStats b = inv->symmetric_memory_stats();
  EXPECT_FALSE(a.enabled);
  EXPECT_NE(a.disabled_reason.find("GROUPCOORD_USE_NCCL_SYMM_MEM"), std::string::npos);
  EXPECT_FALSE(b.enabled);
  EXPECT_NE(b.disabled_reason.find("GROUPCOORD_BATCH_INVARIANT"), std::string::npos);
  const Tensor x = device_floats({256}, device(), [](std::int64_t i) { return i; });
  host_values(inv->all_gather(x, 0));
  EXPECT_EQ(inv->symmetric_memory_stats().symmetric_calls, 0);
  EXPECT_EQ(inv->symmetric_memory_stats().windows_registered, 0);
  expect_invalid_argument([&] { inv->symmetric_empty({4}, DType::Float32); },
                 {"symm-invariant", "symmetric_empty", "BATCH_INVARIANT"});
  off->destroy();
  inv->destroy();
}

TEST_F(CudaSymmetric, OneRankRefusingTurnsItOffEverywhere) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  Env env = kOn;
  if (rank() == 1) env["GROUPCOORD_USE_NCCL_SYMM_MEM"] = "0";
  auto c = make("symm-split", env);
  const SymmetricMemoryStats s = c->symmetric_memory_stats();
  EXPECT_FALSE(s.enabled);
  if (rank() == 0) EXPECT_NE(s.disabled_reason.find("rank"), std::string::npos) << s.disabled_reason;
  const Tensor x = device_floats({256}, device(), [](std::int64_t i) { return i; });
  EXPECT_EQ(host_values(c->all_gather(x, 0)).size(), 256u * world_size());
  c->destroy();
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
