// InFlightRing (the watchdog's record of NCCL operations in flight): entries stay pending while
// their stream is held back, are released in stream order once it runs, a full ring refuses, one
// stream's completed entries go while another stream still blocks the head, and teardown hands
// the buffers of running entries to the caller. A stream is held back by cuStreamWaitValue32 on
// pinned host memory, which the test then writes.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/nccl/in_flight_ring.h"
#include "cuda/runtime/driver_calls.h"
#include "cuda_values.h"
#include "groupcoord/cuda/runtime.h"

namespace groupcoord {
namespace {

using cuda::InFlightRing;

// A stream that waits for the host to write 1 into pinned memory before it runs anything.
class HeldStream {
 public:
  HeldStream() {
    cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    cudaHostAlloc(reinterpret_cast<void**>(&flag_), sizeof(std::uint32_t), cudaHostAllocMapped);
    *flag_ = 0;
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &found);
    using WaitValue32 = int (*)(cudaStream_t, void*, std::uint32_t, unsigned);
    wait_ = reinterpret_cast<WaitValue32>(fn);
  }
  ~HeldStream() {
    release();
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    cudaFreeHost(flag_);
  }
  /// Everything enqueued after this waits for release(). 0 is CU_STREAM_WAIT_VALUE_GEQ.
  bool hold() { return wait_ != nullptr && wait_(stream_, flag_, 1, 0) == 0; }
  void release() { *reinterpret_cast<volatile std::uint32_t*>(flag_) = 1; }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
  std::uint32_t* flag_ = nullptr;
  int (*wait_)(cudaStream_t, void*, std::uint32_t, unsigned) = nullptr;
};

// A buffer that says when its last reference died: the test hands its only reference to the
// ring, so `*freed` tells whether the ring still holds it.
Tensor buffer(bool* freed) {
  static float storage[4];
  *freed = false;
  return Tensor::from_blob(storage, {4}, DType::Float32, Device::cpu(),
                           [freed](void*) { *freed = true; });
}

InFlightRing::Push push(InFlightRing& ring, const char* op, cudaStream_t stream,
                        Tensor keepalive = {}) {
  cudaError_t error = cudaSuccess;
  const InFlightRing::Push result = ring.push(op, stream, /*enqueued_ns=*/1, keepalive, &error);
  EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  return result;
}

// A consumer's pass; the buffers it released are destroyed at once.
InFlightRing::Scan reap(InFlightRing& ring) {
  std::vector<Tensor> released;
  return ring.reap(released);
}

class InFlightRingGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << testing::kNoGpuMessage;
    cudaSetDevice(0);
  }
};

TEST_F(InFlightRingGpu, EntriesStayPendingUntilTheirStreamRuns) {
  InFlightRing ring(16);
  HeldStream held;
  ASSERT_TRUE(held.hold()) << "cuStreamWaitValue32 is not available";
  bool freed = false;
  ASSERT_EQ(push(ring, "first", held.get(), buffer(&freed)), InFlightRing::Push::kDone);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(push(ring, "later", held.get()), InFlightRing::Push::kDone);

  InFlightRing::Scan scan = reap(ring);
  EXPECT_EQ(scan.pending, 6u);
  EXPECT_STREQ(scan.oldest_op, "first");
  EXPECT_FALSE(freed) << "the ring holds the buffer while the operation runs";
  EXPECT_FALSE(ring.empty());

  held.release();
  cudaStreamSynchronize(held.get());
  scan = reap(ring);
  EXPECT_EQ(scan.pending, 0u);
  EXPECT_EQ(scan.oldest_op, nullptr);
  EXPECT_TRUE(freed) << "released once seen complete";
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.room(), 16u);
}

// Events made up front (NcclComm does so at creation) serve pushes like lazily made ones, and
// the driver-first record and capture check (driver_calls.h) answer as the runtime does: an
// entry on a held stream is pending until it runs, and the capture state follows the stream.
TEST_F(InFlightRingGpu, PreparedEventsAndDriverCallsTrackLikeTheRuntime) {
  InFlightRing ring(8);
  ASSERT_EQ(ring.create_events(), cudaSuccess);
  ASSERT_EQ(ring.create_events(), cudaSuccess) << "a second call finds every event made";
  HeldStream held;
  ASSERT_TRUE(held.hold());
  bool freed = false;
  ASSERT_EQ(push(ring, "prepared", held.get(), buffer(&freed)), InFlightRing::Push::kDone);
  EXPECT_EQ(reap(ring).pending, 1u);
  EXPECT_FALSE(freed);
  held.release();
  cudaStreamSynchronize(held.get());
  EXPECT_EQ(reap(ring).pending, 0u);
  EXPECT_TRUE(freed);

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  ASSERT_EQ(cuda::query_capture(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  ASSERT_EQ(cuda::query_capture(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphDestroy(graph);
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cuda::record_event(event, stream), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(event), cudaSuccess);
  cudaEventDestroy(event);
  cudaStreamDestroy(stream);
}

TEST_F(InFlightRingGpu, AFullRingRefusesUntilReaped) {
  InFlightRing ring(4);
  HeldStream held;
  ASSERT_TRUE(held.hold());
  for (int i = 0; i < 4; ++i) ASSERT_EQ(push(ring, "op", held.get()), InFlightRing::Push::kDone);
  EXPECT_EQ(ring.room(), 0u);
  EXPECT_EQ(push(ring, "op", held.get()), InFlightRing::Push::kFull);
  reap(ring);
  EXPECT_EQ(push(ring, "op", held.get()), InFlightRing::Push::kFull) << "nothing completed";

  held.release();
  cudaStreamSynchronize(held.get());
  reap(ring);
  EXPECT_EQ(ring.room(), 4u);
  // The slots (and their events) are reused in a new lap.
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(push(ring, "lap", held.get()), InFlightRing::Push::kDone);
    cudaStreamSynchronize(held.get());
    reap(ring);
  }
  EXPECT_TRUE(ring.empty());
}

TEST_F(InFlightRingGpu, CompletedEntriesOfOneStreamGoWhileAnotherBlocksTheHead) {
  InFlightRing ring(16);
  HeldStream blocked;
  ASSERT_TRUE(blocked.hold());
  cudaStream_t free_stream = nullptr;
  cudaStreamCreateWithFlags(&free_stream, cudaStreamNonBlocking);
  bool blocked_freed = false, free_freed = false;
  ASSERT_EQ(push(ring, "blocked", blocked.get(), buffer(&blocked_freed)),
            InFlightRing::Push::kDone);
  ASSERT_EQ(push(ring, "free", free_stream, buffer(&free_freed)), InFlightRing::Push::kDone);
  cudaStreamSynchronize(free_stream);

  const InFlightRing::Scan scan = reap(ring);
  EXPECT_EQ(scan.pending, 1u);
  EXPECT_STREQ(scan.oldest_op, "blocked");
  EXPECT_TRUE(free_freed) << "the completed entry let its buffer go";
  EXPECT_FALSE(blocked_freed);
  EXPECT_EQ(ring.room(), 14u) << "the head waits for the blocked entry";

  blocked.release();
  cudaStreamSynchronize(blocked.get());
  reap(ring);
  EXPECT_EQ(ring.room(), 16u);
  cudaStreamDestroy(free_stream);
}

TEST_F(InFlightRingGpu, FindsTheCompletionBoundaryOfALongStream) {
  // Entries before the hold complete, those after it do not: the pass releases exactly the first.
  InFlightRing ring(256);
  HeldStream held;
  for (int i = 0; i < 37; ++i)
    ASSERT_EQ(push(ring, "early", held.get()), InFlightRing::Push::kDone);
  cudaStreamSynchronize(held.get());
  ASSERT_TRUE(held.hold());
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(push(ring, "late", held.get()), InFlightRing::Push::kDone);
  const InFlightRing::Scan scan = reap(ring);
  EXPECT_EQ(scan.pending, 100u);
  EXPECT_STREQ(scan.oldest_op, "late");
  EXPECT_EQ(ring.room(), 156u);
  // The newest entry, then a binary search over 137 entries: at most 1 + ceil(log2 137) queries.
  EXPECT_LE(scan.queries, 9u);
  held.release();
}

// What reaping costs: the watchdog's event queries take the driver's lock that the caller's
// launches need. A stream's completed entries cost one query however many there are; a stream
// without an id (the per-thread default stream) is queried entry by entry.
TEST_F(InFlightRingGpu, ReapingAStreamCostsOneQueryWhenAllOfItCompleted) {
  InFlightRing ring(2048);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  unsigned long long id = 0;
  ASSERT_TRUE(cuda::stream_id(stream, &id)) << "cuStreamGetId is not available";
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(push(ring, "op", stream), InFlightRing::Push::kDone);
  cudaStreamSynchronize(stream);
  InFlightRing::Scan scan = reap(ring);
  EXPECT_EQ(scan.pending, 0u);
  EXPECT_EQ(scan.queries, 1u);
  EXPECT_TRUE(ring.empty());

  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(push(ring, "per-thread", cudaStreamPerThread), InFlightRing::Push::kDone);
  }
  cudaStreamSynchronize(cudaStreamPerThread);
  scan = reap(ring);
  EXPECT_EQ(scan.pending, 0u);
  EXPECT_EQ(scan.queries, 10u) << "no inference on the per-thread default stream";
  cudaStreamDestroy(stream);
}

// A destroyed stream's handle value may come back for a new stream; entries of the old one must
// not be taken for complete because the new one's are (their buffers may still be in use).
TEST_F(InFlightRingGpu, ANewStreamOnAReusedHandleNeverCompletesTheOldOnesEntries) {
  InFlightRing ring(64);
  HeldStream held;  // keeps its own stream; the old stream below waits on its flag
  cudaStream_t old_stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&old_stream, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t gate = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&gate, cudaEventDisableTiming), cudaSuccess);
  ASSERT_TRUE(held.hold());
  ASSERT_EQ(cudaEventRecord(gate, held.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(old_stream, gate, 0), cudaSuccess);  // old_stream now waits
  bool old_freed = false;
  ASSERT_EQ(push(ring, "old", old_stream, buffer(&old_freed)), InFlightRing::Push::kDone);
  ASSERT_EQ(push(ring, "old", old_stream), InFlightRing::Push::kDone);
  const cudaStream_t old_handle = old_stream;
  ASSERT_EQ(cudaStreamDestroy(old_stream), cudaSuccess);  // its work still runs later
  // Try for the same handle value (allocators often hand it back at once).
  std::vector<cudaStream_t> made;
  cudaStream_t fresh = nullptr;
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&fresh, cudaStreamNonBlocking), cudaSuccess);
    if (fresh == old_handle) break;
    made.push_back(fresh);
  }
  std::printf("the new stream %s the old stream's handle\n",
              fresh == old_handle ? "reuses" : "does not reuse");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(push(ring, "new", fresh), InFlightRing::Push::kDone);
  cudaStreamSynchronize(fresh);
  const InFlightRing::Scan scan = reap(ring);
  EXPECT_EQ(scan.pending, 2u) << "the old stream's entries are still running";
  EXPECT_STREQ(scan.oldest_op, "old");
  EXPECT_FALSE(old_freed);
  held.release();
  cudaDeviceSynchronize();
  EXPECT_EQ(reap(ring).pending, 0u);
  EXPECT_TRUE(old_freed);
  cudaEventDestroy(gate);
  cudaStreamDestroy(fresh);
  for (cudaStream_t s : made) cudaStreamDestroy(s);
}

TEST_F(InFlightRingGpu, TeardownHandsOverTheBuffersOfRunningEntries) {
  InFlightRing ring(8);
  HeldStream held;
  cudaStream_t free_stream = nullptr;
  cudaStreamCreateWithFlags(&free_stream, cudaStreamNonBlocking);
  bool done_freed = false, running_freed = false;
  ASSERT_EQ(push(ring, "done", free_stream, buffer(&done_freed)), InFlightRing::Push::kDone);
  cudaStreamSynchronize(free_stream);
  ASSERT_TRUE(held.hold());
  ASSERT_EQ(push(ring, "running", held.get(), buffer(&running_freed)), InFlightRing::Push::kDone);

  std::vector<Tensor> kept;
  EXPECT_EQ(ring.release_all(false, [&](Tensor t) { kept.push_back(std::move(t)); }), 1u);
  EXPECT_EQ(kept.size(), 1u);
  EXPECT_TRUE(done_freed);
  EXPECT_FALSE(running_freed) << "the running entry's buffer went to the caller";
  kept.clear();
  EXPECT_TRUE(running_freed);
  EXPECT_TRUE(ring.empty());
  held.release();
  cudaStreamDestroy(free_stream);
}

}  // namespace
}  // namespace groupcoord
