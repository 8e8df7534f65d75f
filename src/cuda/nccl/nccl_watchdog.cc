// NcclComm's watchdog thread and failure handling. The thread wakes every few milliseconds while
// operations are in flight (rarely otherwise), reaps the operations whose events completed, and
// aborts the communicator on an asynchronous NCCL error or when the oldest operation has been in
// flight longer than the timeout. Waiting callers then see the broken flag and throw.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "cuda/nccl/nccl_comm.h"
#include "cuda/nccl/steady_nanoseconds.h"
#include "cuda/runtime/abort_registry.h"
#include "cuda/runtime/cuda_check.h"
#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

namespace {

// Poll periods: short while work is in flight (the timeout is detected within this much), long
// when idle (only asynchronous errors can show up then).
constexpr std::chrono::milliseconds kBusyPeriod{10};
constexpr std::chrono::milliseconds kIdlePeriod{200};

}  // namespace

void NcclComm::keep_forever(Tensor buffer) {
  // Reachable, so leak checkers stay quiet, until the process ends.
  static std::mutex mutex;
  static auto* kept = new std::vector<Tensor>();
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(buffer));
}

void NcclComm::break_locked(bool timed_out, const std::string& reason) {
  if (broken_) return;  // the first reason is the one worth reporting
  broken_ = true;
  live_comm_.store(nullptr, std::memory_order_release);
  broken_by_timeout_ = timed_out;
  broken_reason_ = reason;
  GC_LOG(Error, name_, ": aborting the NCCL communicator (rank ", rank_, " of ", size_, " on ",
         device_.str(), "): ", reason);
  if (comm_ != nullptr) {
    // Aborting makes NCCL's kernels give up, so every stream waiting on them drains.
    api_->CommAbort(comm_);
    comm_ = nullptr;
  }
  record_abort(name_ + ": " + reason);
}

void NcclComm::break_comm(bool timed_out, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  break_locked(timed_out, reason);
}

void NcclComm::throw_broken(const char* op) const {
  if (broken_by_timeout_) {
    GC_THROW(TimeoutError, name_, " ", op, ": the NCCL communicator was aborted because ",
             broken_reason_);
  }
  GC_THROW(DistributedError, name_, " ", op, ": the NCCL communicator was aborted because ",
           broken_reason_);
}

void NcclComm::watchdog_loop() {
  // The watchdog may query events while another thread captures a CUDA graph in global mode,
  // which would make those calls fail (and invalidate the capture): relax the mode for this
  // thread.
  cudaSetDevice(device_.index);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  std::unique_lock<std::mutex> lock(watchdog_mutex_);
  while (!stop_) {
    wake_.wait_for(lock, in_flight_.empty() ? kIdlePeriod : kBusyPeriod);
    if (stop_) break;
    lock.unlock();
    try {
      watchdog_check();
    } catch (const std::exception& e) {
      GC_LOG(Error, name_, ": NCCL watchdog: ", e.what());
    }
    lock.lock();
  }
}

void NcclComm::check_watched_call() {
  const std::int64_t deadline = watched_deadline_.load(std::memory_order_acquire);
  if (deadline == 0 || coarse_steady_nanoseconds() < deadline) return;
  const char* op = watched_op_.load(std::memory_order_relaxed);
  break_comm(true, std::string(op != nullptr ? op : "an NCCL call") +
                       " did not return from NCCL within the group's timeout of " +
                       std::to_string(timeout_.count()) +
                       " ms (a peer that never joined it? did every rank call it?)");
}

void NcclComm::watchdog_check() {
  check_watched_call();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_ && comm_ != nullptr) {
      ncclResult_t state = ncclSuccess;
      api_->CommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        break_locked(false, "NCCL reported an asynchronous error: " + nccl_result_text(state) +
                                last_error_locked());
      }
    }
  }
  std::vector<Tensor> released;  // destroyed at the end of the round, no lock held
  const InFlightRing::Scan scan = in_flight_.reap(released);
  std::string failure;
  bool timed_out = false;
  if (scan.failed_op != nullptr) {
    failure = std::string(scan.failed_op) + " failed on the GPU: " + cuda_error_text(scan.failure);
  } else if (scan.oldest_op != nullptr) {
    const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::nanoseconds(coarse_steady_nanoseconds() - scan.oldest_enqueued_ns));
    if (age > timeout_) {
      timed_out = true;
      failure = std::string(scan.oldest_op) + " did not complete within the group's timeout of " +
                std::to_string(timeout_.count()) + " ms (enqueued " + std::to_string(age.count()) +
                " ms ago; did every rank call it?)";
    }
  }
  if (!failure.empty()) break_comm(timed_out, failure);
}

void NcclComm::release_in_flight(bool all_completed) {
  // The GPU may still touch the buffers of operations that never completed: leaking them beats
  // freeing memory in use.
  const std::size_t leaked = in_flight_.release_all(all_completed, keep_forever);
  if (leaked > 0) {
    GC_LOG(Warn, name_, ": ", leaked,
           " NCCL operation(s) had not completed at teardown; their "
           "buffers are leaked on purpose");
  }
}

}  // namespace cuda
}  // namespace groupcoord
