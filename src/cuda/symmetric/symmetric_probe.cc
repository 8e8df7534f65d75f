#include "cuda/symmetric/symmetric_probe.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <utility>

#include "cuda/runtime/device_guard.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

namespace {

constexpr std::size_t kProbeBytes = 2u << 20;

std::string failure(const NcclApi& api, ncclComm_t comm, const char* call, ncclResult_t result) {
  std::string text = std::string(call) + " failed: " + nccl_result_text(result);
  if (comm != nullptr && api.GetLastError != nullptr) {
    const char* last = api.GetLastError(comm);
    if (last != nullptr && *last != '\0') text += std::string(": ") + last;
  }
  return text;
}

// One attempt on a fresh one-rank communicator (blocking: there is no peer to wait for).
std::string try_registration(const NcclApi& api, Device device, int flags) {
  if (!api.has_windows()) return "the loaded NCCL has no window API";
  DeviceGuard guard(device);
  ncclUniqueId id;
  ncclResult_t result = api.GetUniqueId(&id);
  if (result != ncclSuccess) return failure(api, nullptr, "ncclGetUniqueId", result);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  ncclComm_t comm = nullptr;
  result = api.CommInitRankConfig(&comm, 1, id, 0, &config);
  if (result != ncclSuccess) {
    if (comm != nullptr) api.CommAbort(comm);
    return failure(api, nullptr, "ncclCommInitRankConfig (probe)", result);
  }
  std::string why;
  void* memory = nullptr;
  result = api.MemAlloc(&memory, kProbeBytes);
  if (result != ncclSuccess) {
    why = failure(api, comm, "ncclMemAlloc", result);
  } else {
    ncclWindow_t window = nullptr;
    result = api.CommWindowRegister(comm, memory, kProbeBytes, &window, flags);
    ncclResult_t state = ncclSuccess;
    api.CommGetAsyncError(comm, &state);
    if (result != ncclSuccess || state != ncclSuccess) {
      why = failure(api, comm, "ncclCommWindowRegister", result != ncclSuccess ? result : state);
    } else if (window == nullptr) {
      why = "ncclCommWindowRegister registered nothing";
    } else {
      api.CommWindowDeregister(comm, window);
    }
  }
  if (why.empty()) {
    api.CommDestroy(comm);
  } else {
    api.CommAbort(comm);
  }
  if (memory != nullptr) api.MemFree(memory);
  cudaGetLastError();
  return why;
}

}  // namespace

std::string probe_window_registration(const NcclApi& api, Device device, int flags) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, std::string> answers;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(device.index, flags);
  auto found = answers.find(key);
  if (found != answers.end()) return found->second;
  std::string why;
  try {
    why = try_registration(api, device, flags);
  } catch (const std::exception& e) {
    why = e.what();
  }
  GC_LOG(Debug, "NCCL window probe on ", device.str(), " (flags ", flags,
         "): ", why.empty() ? "ok" : why);
  return answers.emplace(key, why).first->second;
}

}  // namespace cuda
}  // namespace groupcoord
