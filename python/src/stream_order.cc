#include "stream_order.h"

#include "groupcoord/check.h"

#ifdef GROUPCOORD_WITH_CUDA
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#endif

namespace groupcoord {
namespace python {

#ifdef GROUPCOORD_WITH_CUDA
namespace {

void check_cuda(cudaError_t rc, const char* call, Device device) {
  if (rc != cudaSuccess) {
    GC_THROW(DistributedError, "ordering two CUDA streams on ", device.str(), ": ", call,
             " failed: ", cudaGetErrorString(rc));
  }
}

/// Makes `device` current for the guard's lifetime: cudaStreamLegacy and new events belong to
/// the current device.
class CurrentDevice {
 public:
  explicit CurrentDevice(Device device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice", device);
    if (previous_ != device.index) check_cuda(cudaSetDevice(device.index), "cudaSetDevice", device);
  }
  ~CurrentDevice() { cudaSetDevice(previous_); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

/// One event per device, reused: a wait captures the event's state when it is enqueued, so
/// recording it again later does not disturb earlier waits. The mutex makes record + wait one
/// step. Leaked on purpose: events live as long as the process.
struct EventPool {
  std::mutex mutex;
  std::map<int, cudaEvent_t> events;
};

EventPool& event_pool() {
  static auto* pool = new EventPool();
  return *pool;
}

}  // namespace

void order_streams(Device device, std::uintptr_t producer, std::uintptr_t consumer) {
  producer = canonical_stream(producer);
  consumer = canonical_stream(consumer);
  if (producer == consumer) return;
  EventPool& pool = event_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  CurrentDevice current(device);
  cudaEvent_t& event = pool.events[device.index];
  if (event == nullptr) {
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate", device);
  }
  check_cuda(cudaEventRecord(event, reinterpret_cast<cudaStream_t>(producer)), "cudaEventRecord",
             device);
  const cudaError_t waited =
      cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(consumer), event, 0);
  if (waited != cudaSuccess) {
    // Usually a capture on one side only: say which streams, so that the caller can find them.
    GC_THROW(DistributedError, "ordering two CUDA streams on ", device.str(), ": stream 0x",
             std::hex, consumer, " waiting for work of stream 0x", producer, std::dec,
             " failed: ", cudaGetErrorString(waited),
             " (a result made on one stream and handed to a consumer capturing another?)");
  }
}

#else

void order_streams(Device device, std::uintptr_t, std::uintptr_t) {
  GC_CHECK(false, "ordering CUDA streams on ", device.str(), ": groupcoord was built without CUDA");
}

#endif

}  // namespace python
}  // namespace groupcoord
