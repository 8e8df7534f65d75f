// NCCL symmetric memory on the "cuda" communicator (issue: one registered scratch window per
// communicator). Run at 1 and 2 ranks; on the single-GPU host the two ranks share the GPU through
// NCCL_HOSTID, where NCCL registers windows but never picks symmetric kernels, so these tests
// check the bookkeeping and the results, not the kernels (NCCL_DEBUG_SUBSYS=TUNING shows those on
// a multi-GPU host). Every communicator here is built for its test with the environment the test
// needs; references are values every rank computes, or the regular path of another communicator.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cuda/nccl/symmetric_allocation.h"
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
const Env kOn = {{"GROUPCOORD_USE_NCCL_SYMM_MEM", "1"},
                 {"GROUPCOORD_SYMM_ALL_REDUCE", "always"},
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

// ---- bookkeeping
// ---------------------------------------------------------------------------------

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
  cuda::SymmetricMemory& sa = a->symmetric_memory();
  cuda::SymmetricMemory& sb = b->symmetric_memory();
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

// ---- NCCL itself on each kind of buffer ---------------------------------------------------------

// NCCL calls made straight on buffers of every kind the symmetric path uses: cudaMalloc,
// ncclMemAlloc, a plain window (NCCL_WIN_DEFAULT) and an NCCL_WIN_COLL_SYMMETRIC window, each used
// with a communicator it may be used with (a window: its owner only). They tell a wrong result of
// the routed path apart from one of NCCL's.
class NcclBufferKinds {
 public:
  struct Buffer {
    std::string name;
    char* base;
    CudaCommunicator* comm;
  };

  // Collective: two communicators (plain and symmetric windows) and `bytes` of each kind.
  using Make = std::function<std::unique_ptr<CudaCommunicator>(const std::string&, const Env&)>;
  NcclBufferKinds(const Make& make, Device device, std::size_t bytes)
      : span_((bytes + (2 << 20) - 1) / (2 << 20) * (2 << 20)) {
    Env plain_env = kOn, symmetric_env = kOn;
    plain_env["GROUPCOORD_SYMM_WINDOW_FLAGS"] = "default";
    symmetric_env["GROUPCOORD_SYMM_WINDOW_FLAGS"] = "symmetric";
    plain_ = make("symm-nccl-plain", plain_env);
    symmetric_ = make("symm-nccl-symmetric", symmetric_env);
    if (!plain_->symmetric_memory_stats().enabled) return;
    const cuda::NcclApi& api = cuda::nccl_api();
    device_memory_ = Tensor::empty({static_cast<std::int64_t>(span_)}, DType::UInt8, device);
    unregistered_ = cuda::SymmetricAllocation::allocate(api, device, span_, "test");
    plain_window_ = cuda::SymmetricAllocation::allocate(api, device, span_, "test");
    plain_->symmetric_memory().register_allocation(plain_window_, "test");
    buffers_ = {{"cudaMalloc", static_cast<char*>(device_memory_.data_ptr()), plain_.get()},
                {"ncclMemAlloc", static_cast<char*>(unregistered_->data()), plain_.get()},
                {"plain window", static_cast<char*>(plain_window_->data()), plain_.get()}};
    if (symmetric_->symmetric_memory_stats().enabled) {
      symmetric_window_ = cuda::SymmetricAllocation::allocate(api, device, span_, "test");
      symmetric_->symmetric_memory().register_allocation(symmetric_window_, "test");
      buffers_.push_back(
          {"symmetric window", static_cast<char*>(symmetric_window_->data()), symmetric_.get()});
    }
  }
  ~NcclBufferKinds() {
    plain_->destroy();
    symmetric_->destroy();
  }

  bool enabled() const { return !buffers_.empty(); }
  std::string disabled_reason() const { return plain_->symmetric_memory_stats().disabled_reason; }
  const std::vector<Buffer>& buffers() const { return buffers_; }

 private:
  std::size_t span_;
  std::unique_ptr<CudaCommunicator> plain_, symmetric_;
  Tensor device_memory_;
  std::shared_ptr<cuda::SymmetricAllocation> unregistered_, plain_window_, symmetric_window_;
  std::vector<Buffer> buffers_;
};

// One call at a time, in place and out of place, at sizes around NCCL's chunk boundaries. The
// output is poisoned (0xFF: NaN) before each call and read again after a pause, so that a write
// NCCL makes after the stream said it was done shows as well.
TEST_F(CudaSymmetric, NcclAllGatherIsExactOnEveryKindOfBuffer) {
  const int n = world_size();
  const std::vector<std::size_t> sizes = {4096, 12288, 12880, 16384, 65536, 1 << 20};
  NcclBufferKinds kinds([&](auto& name, auto& env) { return make(name, env); }, device(),
                        (static_cast<std::size_t>(n) + 1) * (1 << 20));
  if (!kinds.enabled()) GTEST_SKIP() << "symmetric memory unavailable: " << kinds.disabled_reason();
  const int r = kinds.buffers()[0].comm->rank_in_group();
  cudaStream_t stream = current_cuda_stream(device());
  int failures = 0;
  for (const auto& buffer : kinds.buffers()) {
    for (const bool in_place : {true, false}) {
      for (const std::size_t bytes : sizes) {
        for (int repeat = 0; repeat < 2; ++repeat) {
          const std::size_t count = bytes / 4, total = bytes * n;
          char* out = buffer.base;
          char* in = in_place ? out + r * bytes : out + total;
          // Distinct values per rank, position and repeat, exact in f32.
          std::vector<float> input(count);
          for (std::size_t i = 0; i < count; ++i) input[i] = r * 1e6f + i + repeat * 0.5f;
          fill_bytes(out, 0xFF, total, device());
          upload(in, input.data(), bytes, device());
          buffer.comm->nccl_comm().enqueue(
              "test all_gather", stream, [&](const cuda::NcclApi& a, ncclComm_t c) {
                return a.AllGather(in, out, count, ncclFloat32, c, stream);
              });
          buffer.comm->nccl_comm().synchronize(stream, "test all_gather");
          std::vector<float> got(total / 4), later(total / 4);
          ASSERT_EQ(cudaMemcpy(got.data(), out, total, cudaMemcpyDeviceToHost), cudaSuccess);
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          ASSERT_EQ(cudaMemcpy(later.data(), out, total, cudaMemcpyDeviceToHost), cudaSuccess);
          std::size_t wrong = 0, first = total / 4;
          for (std::size_t i = 0; i < total / 4; ++i) {
            const float want = static_cast<float>(i / count) * 1e6f + i % count + repeat * 0.5f;
            if (!(got[i] == want) && wrong++ == 0) first = i;
          }
          const bool late = std::memcmp(got.data(), later.data(), total) != 0;
          if (wrong > 0 || late) {
            ++failures;
            ADD_FAILURE() << buffer.name << (in_place ? ", in place" : ", out of place") << ", "
                          << bytes << " bytes per rank, repeat " << repeat << ": " << wrong
                          << " wrong floats, first at byte " << first * 4 << " (rank "
                          << first / count << "'s part)"
                          << (late ? "; the output changed after the stream was done" : "");
          }
        }
      }
    }
  }
  std::printf("[symmetric] ncclAllGather one at a time on %zu kinds of buffer: %d wrong\n",
              kinds.buffers().size(), failures);
}

// The routed path's pattern without groupcoord in between: stage the input into the buffer, run
// NCCL, copy the result out, 400 times back to back on one stream with no host wait, then check
// every result. all_gather in place, reduce_scatter into a region after its input.
TEST_F(CudaSymmetric, NcclBackToBackCallsAreExactOnEveryKindOfBuffer) {
  const int n = world_size();
  constexpr int kCalls = 400;
  constexpr std::size_t kMaxBytes = 24576;  // per rank
  NcclBufferKinds kinds([&](auto& name, auto& env) { return make(name, env); }, device(),
                        2 * kMaxBytes * n + (64 << 10));
  if (!kinds.enabled()) GTEST_SKIP() << "symmetric memory unavailable: " << kinds.disabled_reason();
  const int r = kinds.buffers()[0].comm->rank_in_group();
  auto bytes_of = [](int call) {
    return 1024 + static_cast<std::size_t>(call * 1237) % 23000 / 4 * 4;
  };
  // Every call's input (n x bytes for reduce_scatter, bytes for all_gather) and result slot.
  std::vector<std::size_t> in_at(kCalls), out_at(kCalls);
  std::size_t in_total = 0, out_total = 0;
  for (int call = 0; call < kCalls; ++call) {
    const std::size_t bytes = bytes_of(call);
    in_at[call] = in_total;
    out_at[call] = out_total;
    in_total += call % 2 ? bytes * n : bytes;  // odd: reduce_scatter
    out_total += call % 2 ? bytes : bytes * n;
  }
  auto value = [](int q, int call, std::size_t i) {
    return static_cast<float>(q * 7 + (i + call) % 1000);
  };
  std::vector<float> inputs(in_total / 4);
  for (int call = 0; call < kCalls; ++call) {
    const std::size_t count = bytes_of(call) / 4 * (call % 2 ? n : 1);
    for (std::size_t i = 0; i < count; ++i) inputs[in_at[call] / 4 + i] = value(r, call, i);
  }
  const Tensor staged =
      Tensor::empty({static_cast<std::int64_t>(in_total)}, DType::UInt8, device());
  upload(staged.data_ptr(), inputs.data(), in_total, device());
  const char* source = static_cast<const char*>(staged.data_ptr());
  cudaStream_t stream = current_cuda_stream(device());
  int failures = 0;
  for (const auto& buffer : kinds.buffers()) {
    const Tensor results =
        Tensor::empty({static_cast<std::int64_t>(out_total)}, DType::UInt8, device());
    char* result = static_cast<char*>(results.data_ptr());
    for (int call = 0; call < kCalls; ++call) {
      const std::size_t bytes = bytes_of(call), count = bytes / 4;
      const bool scatter = call % 2 == 1;
      char* in = buffer.base + (scatter ? 0 : r * bytes);
      char* out = buffer.base + (scatter ? (bytes * n + 4095) / 4096 * 4096 : 0);
      ASSERT_EQ(cudaMemcpyAsync(in, source + in_at[call], scatter ? bytes * n : bytes,
                                cudaMemcpyDeviceToDevice, stream),
                cudaSuccess);
      buffer.comm->nccl_comm().enqueue("test", stream, [&](const cuda::NcclApi& a, ncclComm_t c) {
        return scatter ? a.ReduceScatter(in, out, count, ncclFloat32, ncclSum, c, stream)
                       : a.AllGather(in, out, count, ncclFloat32, c, stream);
      });
      ASSERT_EQ(cudaMemcpyAsync(result + out_at[call], out, scatter ? bytes : bytes * n,
                                cudaMemcpyDeviceToDevice, stream),
                cudaSuccess);
    }
    buffer.comm->nccl_comm().synchronize(stream, "test");
    std::vector<float> got(out_total / 4);
    ASSERT_EQ(cudaMemcpy(got.data(), result, out_total, cudaMemcpyDeviceToHost), cudaSuccess);
    int wrong_calls = 0, first_wrong = -1;
    for (int call = 0; call < kCalls; ++call) {
      const std::size_t count = bytes_of(call) / 4;
      const float* g = got.data() + out_at[call] / 4;
      bool ok = true;
      if (call % 2) {
        for (std::size_t i = 0; i < count && ok; ++i) {
          float sum = 0;
          for (int q = 0; q < n; ++q) sum += value(q, call, r * count + i);
          ok = g[i] == sum;
        }
      } else {
        for (std::size_t i = 0; i < count * n && ok; ++i) {
          ok = g[i] == value(static_cast<int>(i / count), call, i % count);
        }
      }
      if (!ok && wrong_calls++ == 0) first_wrong = call;
    }
    if (wrong_calls > 0) {
      ++failures;
      ADD_FAILURE() << buffer.name << ": " << wrong_calls << " of " << kCalls
                    << " back-to-back calls wrong, the first at call " << first_wrong;
    }
  }
  std::printf("[symmetric] NCCL back to back on %zu kinds of buffer: %d with wrong results\n",
              kinds.buffers().size(), failures);
}

// ---- against the regular path (vLLM's test_nccl_symm_mem: bf16 randint(1, 23), 4M elements) ----

TEST_F(CudaSymmetric, MatchesTheRegularPathOnBf16) {
  auto symm = make("symm-bf16", kOn);
  auto plain = make("plain-bf16", kOff);
  require_enabled(*symm);
  EXPECT_FALSE(plain->symmetric_memory_stats().enabled);
  const int r = symm->rank_in_group(), n = symm->world_size();
  constexpr std::int64_t kCount = 4 << 20;
  // Element i of rank q's input, randint(1, 23) hashed from (q, i): every rank can recompute it.
  auto input = [](int q, std::int64_t i) {
    std::uint64_t z = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i * 64 + q + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<double>(1 + (z ^ (z >> 31)) % 22);
  };
  const Tensor x = device_tensor({kCount}, DType::BFloat16, device(),
                                 [&](std::int64_t i) { return input(r, i); });
  EXPECT_EQ(host_values(symm->all_gather(x, 0)), host_values(plain->all_gather(x, 0)))
      << "all_gather is exact";
  const std::vector<double> symm_rs = host_values(symm->reduce_scatter(x, 0));
  const std::vector<double> plain_rs = host_values(plain->reduce_scatter(x, 0));
  const std::vector<double> symm_ar = host_values(symm->all_reduce(x));
  const std::vector<double> plain_ar = host_values(plain->all_reduce(x));
  if (22 * n <= 256) {
    // Every partial sum of n <= 11 ranks' inputs is an integer <= 242 < 2^8, exact in bf16 (8
    // significant bits) whatever the order of the additions: both paths give the exact sums.
    std::vector<double> sum(kCount, 0.0);
    for (int q = 0; q < n; ++q) {
      for (std::int64_t i = 0; i < kCount; ++i) sum[i] += input(q, i);
    }
    const std::int64_t chunk = kCount / n;
    // `got` must be elements [from, from + count) of the sum.
    auto exact = [&](const std::vector<double>& got, std::int64_t from, std::int64_t count,
                     const char* what) {
      ASSERT_EQ(got.size(), static_cast<std::size_t>(count)) << what;
      for (std::int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(got[i], sum[from + i]) << what << ": element " << from + i << " of the sum";
      }
    };
    exact(symm_rs, r * chunk, chunk, "symmetric reduce_scatter");
    exact(plain_rs, r * chunk, chunk, "regular reduce_scatter");
    exact(symm_ar, 0, kCount, "symmetric all_reduce");
    exact(plain_ar, 0, kCount, "regular all_reduce");
  } else {
    // From 12 ranks on, sums reach integers bf16 rounds (its spacing is 2 from 256 on) and the
    // two paths may add in different orders: vLLM's tolerance (atol 2.5, rtol 0.1) between them.
    auto close = [](const std::vector<double>& got, const std::vector<double>& want,
                    const char* what) {
      ASSERT_EQ(got.size(), want.size()) << what;
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - want[i]), 2.5 + 0.1 * std::fabs(want[i])) << what << " " << i;
      }
    };
    close(symm_rs, plain_rs, "reduce_scatter");
    close(symm_ar, plain_ar, "all_reduce");
  }
  const SymmetricMemoryStats s = symm->symmetric_memory_stats();
  EXPECT_EQ(s.symmetric_calls, 3);
  EXPECT_EQ(s.windows_registered, 1);
  EXPECT_EQ(plain->symmetric_memory_stats().symmetric_calls, 0);
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
    upload(x.data_ptr(), host.data(), host.size() * 4, device());
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
    upload(t.data_ptr(), host.data(), host.size() * 4, device());
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
  if (rank() == 0)
    EXPECT_NE(s.disabled_reason.find("rank"), std::string::npos) << s.disabled_reason;
  const Tensor x = device_floats({256}, device(), [](std::int64_t i) { return i; });
  EXPECT_EQ(host_values(c->all_gather(x, 0)).size(), 256u * world_size());
  c->destroy();
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
