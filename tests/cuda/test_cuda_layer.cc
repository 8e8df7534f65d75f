// The CUDA layer's process-wide pieces: initialisation (no GPU needed), current streams, the
// stream-ordered allocator and the strided copy kernel (GPU; skipped without one). Copies are
// checked against values computed from indices on the host.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "cuda/runtime/abort_registry.h"
#include "cuda/runtime/capture_status.h"
#include "cuda_values.h"
#include "groupcoord/cuda/allocator.h"
#include "groupcoord/cuda/graph_capture.h"
#include "groupcoord/cuda/runtime.h"
#include "groupcoord/cuda/stream.h"
#include "groupcoord/device_copy.h"
#include "groupcoord/errors.h"

namespace groupcoord {
namespace {

using testing::device_tensor;
using testing::element_count;
using testing::host_values;

// An engine's allocator: never actually used for memory here.
class EngineAllocator final : public Allocator {
 public:
  void* allocate(std::size_t, Device) override { throw std::bad_alloc(); }
  void deallocate(void*, std::size_t, Device) override {}
};

TEST(CudaLayerInit, KeepsAnEngineAllocatorAndInstallsOneOtherwise) {
  auto engine = std::make_shared<EngineAllocator>();
  set_allocator(DeviceType::CUDA, engine);
  init_cuda_layer();
  EXPECT_EQ(get_allocator(DeviceType::CUDA), engine);
  EXPECT_FALSE(install_cuda_allocator_if_absent());

  set_allocator(DeviceType::CUDA, nullptr);
  init_cuda_layer();
  EXPECT_NE(std::dynamic_pointer_cast<CudaAsyncAllocator>(get_allocator(DeviceType::CUDA)),
            nullptr);
  EXPECT_NE(get_device_copy(DeviceType::CUDA), nullptr);
  EXPECT_FALSE(install_cuda_allocator_if_absent()) << "idempotent";
}

TEST(CudaLayerInit, DeviceCountNeverThrows) {
  EXPECT_GE(cuda_device_count(), 0);
  EXPECT_EQ(cuda_device_count(), testing::visible_gpus());
}

TEST(CudaLayerInit, BadDevicesAreInvalidArguments) {
  EXPECT_THROW(current_cuda_stream(Device::cpu()), std::invalid_argument);
  if (cuda_device_count() == 0) {
    EXPECT_THROW(current_cuda_stream(Device::cuda(0)), DistributedError);
  } else {
    EXPECT_THROW(current_cuda_stream(Device::cuda(cuda_device_count())), std::invalid_argument);
  }
}

TEST(CudaLayerInit, WaitsNoticeAbortsThatHappenedMeanwhile) {
  const std::uint64_t before = cuda::abort_generation();
  EXPECT_NO_THROW(cuda::throw_if_aborted_since(before, "copy"));
  cuda::record_abort("tp:0: all_reduce did not complete within 5000 ms");
  EXPECT_EQ(cuda::abort_generation(), before + 1);
  try {
    cuda::throw_if_aborted_since(before, "Tensor::copy_from on cuda:0");
    FAIL() << "expected DistributedError";
  } catch (const DistributedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("Tensor::copy_from on cuda:0"), std::string::npos) << message;
    EXPECT_NE(message.find("tp:0: all_reduce did not complete"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(cuda::throw_if_aborted_since(cuda::abort_generation(), "copy"));
}

// ---- with a GPU -------------------------------------------------------------------------------

class CudaLayerGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << testing::kNoGpuMessage;
    init_cuda_layer();
  }
  const Device device_ = Device::cuda(0);
};

TEST_F(CudaLayerGpu, DefaultStreamIsNonBlockingAndPerThread) {
  CudaStream mine = current_cuda_stream(device_);
  EXPECT_EQ(mine, default_cuda_stream(device_));
  EXPECT_NE(mine, nullptr) << "never the legacy default stream";
  unsigned int flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(mine, &flags), cudaSuccess);
  EXPECT_EQ(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
  CudaStream other = nullptr;
  std::thread([&] { other = current_cuda_stream(device_); }).join();
  EXPECT_NE(other, mine);
}

TEST_F(CudaLayerGpu, GuardsNestAndRestore) {
  CudaStream base = current_cuda_stream(device_);
  cudaStream_t a = nullptr;
  cudaStream_t b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  {
    CudaStreamGuard outer(device_, a);
    EXPECT_EQ(current_cuda_stream(device_), a);
    {
      CudaStreamGuard inner(device_, reinterpret_cast<std::uintptr_t>(b));  // a torch handle
      EXPECT_EQ(current_cuda_stream(device_), b);
      {
        CudaStreamGuard legacy(device_, std::uintptr_t{0});
        EXPECT_EQ(current_cuda_stream(device_), nullptr) << "0 is the legacy stream, as asked";
      }
      EXPECT_EQ(current_cuda_stream(device_), b);
    }
    EXPECT_EQ(current_cuda_stream(device_), a);
    // Another thread does not see this thread's guard.
    CudaStream seen = nullptr;
    std::thread([&] { seen = current_cuda_stream(device_); }).join();
    EXPECT_NE(seen, a);
  }
  EXPECT_EQ(current_cuda_stream(device_), base);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

TEST_F(CudaLayerGpu, GraphCaptureContextOwnsTheCurrentStream) {
  CudaStream base = current_cuda_stream(device_);
  // Work on the base stream must be visible to the capture stream.
  Tensor source = device_tensor({1000}, DType::Float32, device_, [](std::int64_t i) { return i; });
  CudaStream capture_stream = nullptr;
  Tensor copy;
  {
    GraphCaptureContext context(device_);
    capture_stream = context.stream();
    EXPECT_NE(capture_stream, base);
    EXPECT_EQ(current_cuda_stream(device_), capture_stream);
    EXPECT_EQ(context.stream_handle(), reinterpret_cast<std::uintptr_t>(capture_stream));
    copy = source.movedim(0, 0).clone();  // a copy on the capture stream
  }
  EXPECT_EQ(current_cuda_stream(device_), base);
  // On exit the base stream waited for the capture stream, so reading on it is safe.
  const std::vector<double> values = host_values(copy);
  for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], static_cast<double>(i));
  GraphCaptureContext again(device_);
  EXPECT_EQ(again.stream(), capture_stream) << "one capture stream per thread and device";
}

TEST_F(CudaLayerGpu, CaptureStatusScopeAnswersForItsStreamOnlyAndNests) {
  cudaStream_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  {
    const cuda::CaptureStatusScope on_a(a, "test");
    EXPECT_FALSE(on_a.capturing());
    // A capture begun inside the scope is not seen: the scope answers for `a`, CUDA is not asked.
    ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_FALSE(cuda::stream_is_capturing(a, "test"));
    {
      const cuda::CaptureStatusScope on_b(b, "test");
      EXPECT_FALSE(on_b.capturing());
      EXPECT_FALSE(cuda::stream_is_capturing(a, "test")) << "the outer scope still answers for a";
      const cuda::CaptureStatusScope again_a(a, "test");
      EXPECT_FALSE(again_a.capturing()) << "a nested scope of the same stream reuses the answer";
    }
  }
  // Outside every scope CUDA is asked again.
  EXPECT_TRUE(cuda::stream_is_capturing(a, "test"));
  {
    const cuda::CaptureStatusScope on_a(a, "test");
    EXPECT_TRUE(on_a.capturing());
    EXPECT_FALSE(cuda::stream_is_capturing(b, "test")) << "other streams are asked of CUDA";
  }
  ASSERT_EQ(cudaStreamEndCapture(a, &graph), cudaSuccess);
  cudaGraphDestroy(graph);
  EXPECT_FALSE(cuda::stream_is_capturing(a, "test"));
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

TEST_F(CudaLayerGpu, AllocatorFreesOnTheAllocationStream) {
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  {
    CudaStreamGuard guard(device_, side);
    Tensor t = Tensor::empty({1 << 20}, DType::Float32, device_);
    EXPECT_NE(t.data_ptr(), nullptr);
    Tensor empty = Tensor::empty({0}, DType::Float32, device_);
    EXPECT_EQ(empty.numel(), 0);
  }  // both freed on `side`
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  cudaStreamDestroy(side);
}

TEST_F(CudaLayerGpu, AllocatorReusesABlockOnlyOnItsStreamAndNeverDuringCapture) {
  CudaAsyncAllocator allocator;
  cudaStream_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  void* first = nullptr;
  {
    CudaStreamGuard guard(device_, a);
    first = allocator.allocate(4000, device_);
    allocator.deallocate(first, 4000, device_);
    EXPECT_EQ(allocator.cached_bytes(), 4096u) << "rounded up to 512 bytes and cached";
    void* again = allocator.allocate(3900, device_);
    EXPECT_EQ(again, first) << "same stream, same rounded size: the cached block";
    EXPECT_EQ(allocator.cached_bytes(), 0u);
    allocator.deallocate(again, 3900, device_);
  }
  {
    CudaStreamGuard guard(device_, b);
    void* other = allocator.allocate(4000, device_);
    EXPECT_NE(other, first) << "a block freed on stream a is not reused on stream b";
    allocator.deallocate(other, 4000, device_);
  }
  {
    // During capture: a graph allocation node, not the cached block; freed into the graph.
    CudaStreamGuard guard(device_, a);
    ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    void* captured = allocator.allocate(4000, device_);
    EXPECT_NE(captured, first);
    allocator.deallocate(captured, 4000, device_);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(a, &graph), cudaSuccess);
    cudaGraphDestroy(graph);
  }
  EXPECT_EQ(allocator.cached_bytes(), 2 * 4096u) << "one block cached per stream";
  EXPECT_EQ(allocator.release_cached(), 2 * 4096u);
  EXPECT_EQ(allocator.cached_bytes(), 0u);
  ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

TEST_F(CudaLayerGpu, AllocatorCachesAnEagerBlockFreedDuringACaptureAndReusesItAfter) {
  // Results made before a capture and dropped inside it, which the graph does not read (a graph
  // that reads an eager tensor needs it alive for its replays, as with torch): no CUDA call
  // during the capture, the blocks back in their stream's cache, handed out again only once the
  // capture has ended.
  CudaAsyncAllocator allocator(/*max_cached_bytes=*/4096);
  cudaStream_t a = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  CudaStreamGuard guard(device_, a);
  void* eager = allocator.allocate(4096, device_);
  void* second = allocator.allocate(4096, device_);
  ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal), cudaSuccess);
  struct EndCaptureOnFailure {  // a failed expectation must not leave the stream capturing
    cudaStream_t stream;        // null once the capture has ended (the stream dies before us)
    ~EndCaptureOnFailure() {
      if (stream == nullptr) return;
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
          status != cudaStreamCaptureStatusNone) {
        cudaGraph_t graph = nullptr;
        if (cudaStreamEndCapture(stream, &graph) == cudaSuccess) cudaGraphDestroy(graph);
      }
      (void)cudaGetLastError();
    }
  } end_capture{a};
  allocator.deallocate(eager, 4096, device_);
  EXPECT_EQ(allocator.cached_bytes(), 4096u) << "cached during the capture";
  allocator.deallocate(second, 4096, device_);
  EXPECT_EQ(allocator.cached_bytes(), 2 * 4096u)
      << "past the bound during a capture: kept, not freed into the graph";
  void* during = allocator.allocate(4096, device_);
  EXPECT_NE(during, eager);
  EXPECT_NE(during, second);
  allocator.deallocate(during, 4096, device_);  // a graph allocation: freed into the graph
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(a, &graph), cudaSuccess) << "the capture stayed valid";
  end_capture.stream = nullptr;
  cudaGraphDestroy(graph);
  void* after = allocator.allocate(4096, device_);
  EXPECT_TRUE(after == eager || after == second) << "the cached block, after the capture";
  allocator.deallocate(after, 4096, device_);
  EXPECT_EQ(allocator.release_cached(), 4096u)
      << "no capture now: the block past the bound went back to the pool, one stayed cached";
  ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  cudaStreamDestroy(a);
}

TEST_F(CudaLayerGpu, AllocatorSaysWhyABlockOfAFailedCaptureCannotBeFreed) {
  // A result allocated inside a capture that then fails (an illegal call invalidates it) and is
  // dropped after: CUDA refuses the free (the memory was the discarded graph's); the error says
  // so, and the allocator goes on working.
  CudaAsyncAllocator allocator;
  cudaStream_t a = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  {
    CudaStreamGuard guard(device_, a);
    ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal), cudaSuccess);
    void* during = nullptr;
    try {
      during = allocator.allocate(256, device_);
    } catch (...) {
      ADD_FAILURE() << "allocating during a capture threw";
    }
    EXPECT_NE(cudaStreamSynchronize(a), cudaSuccess) << "illegal during a capture";
    cudaGraph_t broken = nullptr;
    EXPECT_NE(cudaStreamEndCapture(a, &broken), cudaSuccess);
    if (broken != nullptr) cudaGraphDestroy(broken);
    (void)cudaGetLastError();
    if (during != nullptr) {
      bool refused = false;  // as the H100 host's driver (580) does
      try {
        allocator.deallocate(during, 256, device_);
      } catch (const DistributedError& e) {
        refused = true;
        EXPECT_NE(std::string(e.what()).find("allocated during a CUDA graph capture"),
                  std::string::npos)
            << e.what();
      }
      EXPECT_TRUE(refused) << "CUDA freed a block of a failed capture";
    }
    (void)cudaGetLastError();
    EXPECT_EQ(allocator.cached_bytes(), 0u) << "a graph's block is never cached";
    void* eager = allocator.allocate(256, device_);
    EXPECT_NO_THROW(allocator.deallocate(eager, 256, device_)) << "the allocator still works";
  }
  ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  cudaStreamDestroy(a);
}

TEST_F(CudaLayerGpu, AllocatorCachesNoMoreThanItsBound) {
  CudaAsyncAllocator allocator(/*max_cached_bytes=*/8192);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(allocator.allocate(4096, device_));
  for (void* p : blocks) allocator.deallocate(p, 4096, device_);
  EXPECT_EQ(allocator.cached_bytes(), 8192u) << "the two blocks past the bound went to the pool";
  EXPECT_EQ(allocator.release_cached(), 8192u);
}

// Value of element `coords` of the reference array of `shape`.
double reference_value(const std::vector<std::int64_t>& coords) {
  double v = 0;
  for (std::int64_t c : coords) v = v * 10 + c;
  return v;
}

TEST_F(CudaLayerGpu, ContiguousOfMovedDimsMatchesIndexArithmetic) {
  const Shape shape{3, 4, 5};
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Int64, DType::UInt8}) {
    Tensor base = device_tensor(shape, dtype, device_, [&](std::int64_t i) {
      return dtype == DType::UInt8 ? i % 251 : reference_value(testing::unravel(i, shape));
    });
    for (int src = 0; src < 3; ++src) {
      for (int dst = 0; dst < 3; ++dst) {
        const Tensor moved = base.movedim(src, dst);
        const Tensor compact = moved.contiguous();
        ASSERT_TRUE(compact.is_contiguous());
        ASSERT_EQ(compact.shape(), moved.shape());
        const std::vector<double> got = host_values(compact);
        for (std::int64_t i = 0; i < compact.numel(); ++i) {
          std::vector<std::int64_t> at = testing::unravel(i, moved.shape());
          // Undo the move to find the element's coordinates in `base`.
          std::vector<std::int64_t> original = at;
          const std::int64_t moved_index = at[dst];
          original.erase(original.begin() + dst);
          original.insert(original.begin() + src, moved_index);
          const std::int64_t flat = testing::ravel(original, shape);
          const double expected = dtype == DType::UInt8 ? flat % 251 : reference_value(original);
          ASSERT_EQ(got[i], expected)
              << dtype_name(dtype) << " movedim(" << src << ", " << dst << ") element " << i;
        }
      }
    }
  }
}

TEST_F(CudaLayerGpu, HostDeviceCopiesWithStridesOnEitherSide) {
  // Host source with a transposed layout, device destination that is a narrowed view.
  Tensor host = Tensor::empty({4, 6}, DType::Int32);
  for (int i = 0; i < 24; ++i) host.data_ptr<std::int32_t>()[i] = i;
  const Tensor host_t = host.movedim(0, 1);  // [6, 4], element (a, b) = b * 6 + a
  Tensor device_base =
      device_tensor({6, 8}, DType::Int32, device_, [](std::int64_t) { return -1; });
  Tensor window = device_base.narrow(1, 2, 4);  // [6, 4] with row stride 8
  window.copy_from(host_t);
  const std::vector<double> got = host_values(device_base);
  for (int a = 0; a < 6; ++a) {
    for (int c = 0; c < 8; ++c) {
      const double expected = (c >= 2 && c < 6) ? (c - 2) * 6 + a : -1;
      ASSERT_EQ(got[a * 8 + c], expected) << "row " << a << " col " << c;
    }
  }
  // Device strided source back into a strided host destination.
  Tensor back = Tensor::empty({4, 6}, DType::Int32);
  Tensor back_t = back.movedim(0, 1);
  back_t.copy_from(window);
  for (int i = 0; i < 24; ++i) ASSERT_EQ(back.data_ptr<std::int32_t>()[i], i);
  // Clone of a device view is a compact device copy.
  const Tensor cloned = window.clone();
  EXPECT_TRUE(cloned.is_contiguous());
  EXPECT_EQ(cloned.device(), device_);
  const std::vector<double> c = host_values(cloned);
  for (int a = 0; a < 6; ++a) {
    for (int b = 0; b < 4; ++b) ASSERT_EQ(c[a * 4 + b], b * 6 + a);
  }
}

TEST_F(CudaLayerGpu, CopiesBetweenTwoDevicesAreRejected) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  Tensor a = Tensor::empty({4}, DType::Float32, Device::cuda(0));
  Tensor b = Tensor::empty({4}, DType::Float32, Device::cuda(1));
  EXPECT_THROW(b.copy_from(a), std::invalid_argument);
}

}  // namespace
}  // namespace groupcoord
