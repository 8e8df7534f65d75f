// NcclComm's symmetric windows: collective registration with a deadline, and their release at
// teardown in an order that never frees memory the GPU or NCCL may still use:
//   1. wait (bounded) for every operation in flight, 2. deregister each window, 3. finalize and
//   destroy the communicator (nccl_comm.cc), 4. the memory is freed when its last owner (a pool
//   tensor, or the released window list) lets go.
// When operations did not finish, or the communicator was aborted, the windows and their memory
// are leaked on purpose (logged): a kernel or a peer may still read them.
#include <chrono>
#include <vector>

#include "cuda/device_guard.h"
#include "cuda/nccl_comm.h"
#include "cuda/poll_pause.h"
#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

namespace {

// Windows that could not be released safely: reachable until the process ends.
void keep_windows_forever(std::vector<RegisteredWindow> windows) {
  static std::mutex mutex;
  static auto* kept = new std::vector<RegisteredWindow>();
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& window : windows) kept->push_back(std::move(window));
}

}  // namespace

ncclWindow_t NcclComm::register_window(void* data, std::size_t bytes, int flags, const char* op,
                                       bool ready) {
  GC_CHECK(api_->CommWindowRegister != nullptr, name_, " ", op,
           ": the loaded NCCL has no ncclCommWindowRegister");
  // ncclCommWindowRegister waits for every rank without a deadline of its own: meet over the
  // CPU group first (which has one), check that every rank registers the same size, and that
  // every rank is able to (its memory allocated, the communicator usable).
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (destroyed_.load() || broken_ || comm_ == nullptr) ready = false;
  }
  const std::int64_t mine[2] = {static_cast<std::int64_t>(bytes), ready ? 1 : 0};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size_));
  group_->all_gather(mine, all.data(), 2, DType::Int64);
  for (int r = 0; r < size_; ++r) {
    if (all[2 * r + 1] == 0) {
      check_usable(op);  // this rank's own reason, when it is the one
      GC_THROW(DistributedError, name_, " ", op, ": rank ", r,
               " of the group cannot register the window (see its error); nobody does");
    }
  }
  for (int r = 0; r < size_; ++r) {
    GC_CHECK(all[2 * r] == mine[0], name_, " ", op, ": rank ", r, " registers a window of ",
             all[2 * r], " bytes but this rank one of ", mine[0],
             "; every rank must register the same size");
  }
  DeviceGuard guard(device_);
  // NCCL registers from its own thread and fills the window in there, possibly after the call
  // returned; the slot lives on the heap so that it stays valid for that write even when we give
  // up waiting (it is then leaked).
  auto* slot = new ncclWindow_t(nullptr);
  ncclResult_t result = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    throw_if_unusable_locked(op);
    result = api_->CommWindowRegister(comm_, data, bytes, slot, flags);
    if (result != ncclSuccess && result != ncclInProgress) {
      delete slot;  // the call was refused before NCCL took the slot
      GC_THROW(DistributedError, name_, " ", op, ": ncclCommWindowRegister refused ", bytes,
               " bytes: ", nccl_result_text(result), last_error_locked());
    }
  }
  // Done means: the window is filled in AND, after that, the communicator is no longer
  // ncclInProgress. The order matters: right after the call ncclCommGetAsyncError may still
  // report the previous ncclSuccess before NCCL's thread has marked the registration in progress
  // (seen on the H200 host: the next collective then failed with "Attempt to use communicator
  // before the previous operation returned ncclSuccess").
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (int round = 0;; ++round) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      throw_if_unusable_locked(op);
      ncclResult_t state = ncclSuccess;
      api_->CommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        break_locked(false, std::string(op) + ": ncclCommWindowRegister failed: " +
                                nccl_result_text(state) + last_error_locked());
        throw_broken(op);
      }
      const ncclWindow_t window = *static_cast<volatile ncclWindow_t*>(slot);
      if (window != nullptr && state == ncclSuccess) {
        delete slot;
        return window;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        break_locked(true, std::string(op) + ": ncclCommWindowRegister of " +
                               std::to_string(bytes) + " bytes did not complete (or registered " +
                               "nothing) within " + std::to_string(timeout_.count()) + " ms");
        throw_broken(op);
      }
    }
    poll_pause(round);
  }
}

bool NcclComm::drain_in_flight(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int round = 0;; ++round) {
    bool all_done = true;
    {
      std::lock_guard<std::mutex> lock(in_flight_mutex_);
      for (const InFlight& entry : in_flight_) {
        if (cudaEventQuery(entry.event) == cudaErrorNotReady) {
          all_done = false;
          break;
        }
      }
    }
    (void)cudaGetLastError();
    if (all_done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    poll_pause(round);
  }
}

void NcclComm::release_windows_locked(std::vector<RegisteredWindow>& windows,
                                      std::chrono::milliseconds limit, bool operations_done) {
  if (windows.empty()) return;
  if (comm_ == nullptr || !operations_done) {
    GC_LOG(Warn, name_, ": ", windows.size(), " symmetric window(s) kept with their memory: ",
           comm_ == nullptr ? "the communicator was aborted" : "operations were still running");
    keep_windows_forever(std::move(windows));
    windows.clear();
    return;
  }
  for (RegisteredWindow& window : windows) {
    ncclResult_t state = api_->CommWindowDeregister(comm_, window.handle);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (int round = 0; state == ncclInProgress; ++round) {
      if (std::chrono::steady_clock::now() >= deadline) break;
      poll_pause(round);
      api_->CommGetAsyncError(comm_, &state);
    }
    if (state != ncclSuccess) {
      GC_LOG(Warn, name_, ": deregistering a symmetric window failed (",
             nccl_result_text(state), "); its memory is kept");
      std::vector<RegisteredWindow> kept;
      kept.push_back(std::move(window));
      keep_windows_forever(std::move(kept));
    }
  }
}

void NcclComm::release_completed() {
  std::vector<Tensor> finished;  // released outside the lock (freeing may call into CUDA)
  {
    std::lock_guard<std::mutex> lock(in_flight_mutex_);
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (cudaEventQuery(it->event) != cudaSuccess) {
        ++it;
        continue;
      }
      event_pool_.push_back(it->event);
      finished.push_back(std::move(it->keepalive));
      it = in_flight_.erase(it);
    }
  }
  (void)cudaGetLastError();
}

}  // namespace cuda
}  // namespace groupcoord
