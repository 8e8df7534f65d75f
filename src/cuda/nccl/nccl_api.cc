#include "cuda/nccl/nccl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include "groupcoord/check.h"
#include "groupcoord/cuda/runtime.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

namespace {

// Where a path came from, for error messages: users must know which knob to turn.
std::string origin_of(const std::string& path) {
  const char* env = std::getenv(kNcclLibraryEnv);
  if (env != nullptr && *env != '\0' && path == env) {
    return std::string(" (from ") + kNcclLibraryEnv + ")";
  }
  if (path == kNcclDefaultLibrary) {
    return std::string(" (the default; set ") + kNcclLibraryEnv + " to pick another file)";
  }
  return "";
}

// Resolves `name` into `slot`; a missing required symbol means this is not a usable NCCL.
template <typename Fn>
void resolve(void* handle, const std::string& path, const char* name, Fn*& slot, bool required) {
  dlerror();  // clear any stale error
  slot = reinterpret_cast<Fn*>(dlsym(handle, name));
  if (slot == nullptr && required) {
    GC_THROW(DistributedError, "NCCL: '", path, "'", origin_of(path), " has no symbol ", name,
             "; it is not an NCCL library this build can use (NCCL >= 2.14 is needed)");
  }
}

// The file the loader actually opened for `handle`, or `fallback` when it cannot tell.
std::string loaded_file(void* symbol, const std::string& fallback) {
  Dl_info info{};
  if (symbol != nullptr && dladdr(symbol, &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return fallback;
}

void resolve_all(void* handle, const std::string& path, NcclApi& api) {
  resolve(handle, path, "ncclGetVersion", api.GetVersion, true);
  resolve(handle, path, "ncclGetErrorString", api.GetErrorString, true);
  resolve(handle, path, "ncclGetLastError", api.GetLastError, false);
  resolve(handle, path, "ncclGetUniqueId", api.GetUniqueId, true);
  resolve(handle, path, "ncclCommInitRankConfig", api.CommInitRankConfig, true);
  resolve(handle, path, "ncclCommFinalize", api.CommFinalize, true);
  resolve(handle, path, "ncclCommDestroy", api.CommDestroy, true);
  resolve(handle, path, "ncclCommAbort", api.CommAbort, true);
  resolve(handle, path, "ncclCommSplit", api.CommSplit, true);
  resolve(handle, path, "ncclCommGetAsyncError", api.CommGetAsyncError, true);
  resolve(handle, path, "ncclCommShrink", api.CommShrink, false);
  resolve(handle, path, "ncclAllReduce", api.AllReduce, true);
  resolve(handle, path, "ncclAllGather", api.AllGather, true);
  resolve(handle, path, "ncclReduceScatter", api.ReduceScatter, true);
  resolve(handle, path, "ncclBroadcast", api.Broadcast, true);
  resolve(handle, path, "ncclReduce", api.Reduce, true);
  resolve(handle, path, "ncclSend", api.Send, true);
  resolve(handle, path, "ncclRecv", api.Recv, true);
  resolve(handle, path, "ncclGroupStart", api.GroupStart, true);
  resolve(handle, path, "ncclGroupEnd", api.GroupEnd, true);
  resolve(handle, path, "ncclMemAlloc", api.MemAlloc, false);
  resolve(handle, path, "ncclMemFree", api.MemFree, false);
  resolve(handle, path, "ncclCommWindowRegister", api.CommWindowRegister, false);
  resolve(handle, path, "ncclCommWindowDeregister", api.CommWindowDeregister, false);
}

// The process-wide table; null until a load succeeds. Never freed: communicators may be torn
// down from static destructors.
std::mutex api_mutex;
const NcclApi* global_api = nullptr;

}  // namespace

std::string nccl_library_path() {
  const char* env = std::getenv(kNcclLibraryEnv);
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(kNcclDefaultLibrary);
}

NcclApi load_nccl_api(const std::string& path) {
  GC_CHECK(!path.empty(), "NCCL: the library path is empty (", kNcclLibraryEnv, ")");
  // RTLD_LOCAL: NCCL's symbols must not satisfy anybody else's lookups (torch may load its own).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    GC_THROW(DistributedError, "NCCL: cannot load '", path, "'", origin_of(path), ": ",
             why != nullptr ? why : "unknown dlopen error");
  }
  NcclApi api;
  try {
    resolve_all(handle, path, api);
  } catch (...) {
    dlclose(handle);
    throw;
  }
  // The handle is deliberately never closed: NCCL keeps threads and CUDA state alive.
  api.path = loaded_file(reinterpret_cast<void*>(api.GetVersion), path);
  const ncclResult_t result = api.GetVersion(&api.version);
  if (result != ncclSuccess) {
    GC_THROW(DistributedError, "NCCL: ncclGetVersion failed in '", api.path, "' (error ",
             static_cast<int>(result), ")");
  }
  return api;
}

const NcclApi& nccl_api() {
  std::lock_guard<std::mutex> lock(api_mutex);
  if (global_api == nullptr) {
    auto api = std::make_unique<NcclApi>(load_nccl_api(nccl_library_path()));
    GC_LOG(Info, "NCCL ", api->version / 10000, ".", api->version / 100 % 100, ".",
           api->version % 100, " loaded from ", api->path, " (built against ", NCCL_MAJOR, ".",
           NCCL_MINOR, ".", NCCL_PATCH, ")");
    global_api = api.release();
  }
  return *global_api;
}

std::string nccl_result_text(ncclResult_t result) {
  const char* name = "unknown NCCL result";
  switch (result) {
    case ncclSuccess:
      name = "ncclSuccess";
      break;
    case ncclUnhandledCudaError:
      name = "ncclUnhandledCudaError";
      break;
    case ncclSystemError:
      name = "ncclSystemError";
      break;
    case ncclInternalError:
      name = "ncclInternalError";
      break;
    case ncclInvalidArgument:
      name = "ncclInvalidArgument";
      break;
    case ncclInvalidUsage:
      name = "ncclInvalidUsage";
      break;
    case ncclRemoteError:
      name = "ncclRemoteError";
      break;
    case ncclInProgress:
      name = "ncclInProgress";
      break;
    default:
      break;
  }
  std::string text = name;
  const NcclApi* api = nullptr;
  {
    std::lock_guard<std::mutex> lock(api_mutex);
    api = global_api;
  }
  if (api != nullptr) text += std::string(" (") + api->GetErrorString(result) + ")";
  return text;
}

}  // namespace cuda

int nccl_runtime_version() { return cuda::nccl_api().version; }

}  // namespace groupcoord
