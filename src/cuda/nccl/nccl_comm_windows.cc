// NcclComm's symmetric windows: collective registration with a deadline (a watched call, see
// nccl_comm.h), and their release at teardown in an order that never frees memory the GPU or
// NCCL may still use:
//   1. wait (bounded) for every operation in flight, 2. deregister each window, 3. finalize and
//   destroy the communicator (nccl_comm.cc), 4. the memory is freed when its last owner (a pool
//   tensor, or the released window list) lets go.
// When operations did not finish, or the communicator was aborted, the windows and their memory
// are leaked on purpose (logged): a kernel or a peer may still read them.
#include <chrono>
#include <vector>

#include "cuda/nccl/nccl_comm.h"
#include "cuda/nccl/poll_pause.h"
#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/device_guard.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
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
    // Aborted and the CPU group broken too (a peer gone): there is nobody to meet, so say why at
    // once. Otherwise the peers are told below that this rank cannot register.
    if (broken_ && group_->is_broken()) throw_broken(op);
    if (destroyed_.load() || broken_ || comm_ == nullptr) ready = false;
  }
  const std::int64_t mine[2] = {static_cast<std::int64_t>(bytes), ready ? 1 : 0};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size_));
  try {
    group_->all_gather(mine, all.data(), 2, DType::Int64);
  } catch (const TimeoutError& e) {
    // A peer that never joins this op: the communicator is as unusable as after a hung NCCL
    // call, and the error names the op (not only the CPU group's step).
    break_comm(true, std::string(op) +
                         " did not start: a peer did not join the window "
                         "registration within the group's timeout (" +
                         e.what() + ")");
    check_usable(op);
  }
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
  ncclWindow_t window = nullptr;
  const ncclResult_t result = call_nccl(op, timeout_, [&](const NcclApi& api, ncclComm_t comm) {
    return api.CommWindowRegister(comm, data, bytes, &window, flags);
  });
  if (result != ncclSuccess) fail_call(op, result);
  GC_CHECK(window != nullptr, name_, " ", op, ": ncclCommWindowRegister registered nothing for ",
           bytes, " bytes");
  return window;
}

bool NcclComm::drain_in_flight(std::chrono::milliseconds limit) {
  RelaxedCaptureMode relaxed;  // event queries must not invalidate another thread's capture
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int round = 0;; ++round) {
    std::vector<Tensor> released;
    const InFlightRing::Scan scan = in_flight_.reap(released);
    // Entries whose event failed never complete: no use waiting for them.
    if (scan.pending == scan.failed) return scan.pending == 0;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    poll_pause(round);
  }
}

void NcclComm::release_windows(std::vector<RegisteredWindow>& windows,
                               std::chrono::milliseconds limit, bool operations_done) {
  if (windows.empty()) return;
  bool usable = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    usable = comm_ != nullptr && !broken_;
  }
  if (!usable || !operations_done) {
    GC_LOG(Warn, name_, ": ", windows.size(), " symmetric window(s) kept with their memory: ",
           usable ? "operations were still running" : "the communicator was aborted");
    keep_windows_forever(std::move(windows));
    windows.clear();
    return;
  }
  for (RegisteredWindow& window : windows) {
    ncclResult_t state = ncclInternalError;
    try {
      state = call_nccl(
          "deregister window", limit,
          [&](const NcclApi& api, ncclComm_t comm) {
            return api.CommWindowDeregister(comm, window.handle);
          },
          /*teardown=*/true);
    } catch (const std::exception& e) {
      GC_LOG(Warn, name_, ": ", e.what());
    }
    if (state != ncclSuccess) {
      GC_LOG(Warn, name_, ": deregistering a symmetric window failed (", nccl_result_text(state),
             "); its memory is kept");
      std::vector<RegisteredWindow> kept;
      kept.push_back(std::move(window));
      keep_windows_forever(std::move(kept));
    }
  }
}

void NcclComm::release_completed() {
  RelaxedCaptureMode relaxed;  // may run on a thread next to another thread's capture
  std::vector<Tensor> released;
  in_flight_.reap(released);
}

}  // namespace cuda
}  // namespace groupcoord
