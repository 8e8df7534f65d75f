// NCCL, loaded at run time. The library is found through dlopen rather than linked, so that a
// process can use a newer NCCL than the one groupcoord was built against (docs/testing.md: the GPU
// host's system NCCL 2.28.3 has broken symmetric kernels; torch ships 2.28.9), and so that
// groupcoord loads on machines without NCCL at all as long as no CUDA communicator is created.
//
// Which file: GROUPCOORD_NCCL_LIBRARY (a path) when set, else "libnccl.so.2" from the dynamic
// loader's search path (LD_LIBRARY_PATH, RPATHs, ld.so.cache). nccl.h is only used for types and
// constants, whose values are stable across NCCL 2.x.
#pragma once

#include <nccl.h>

#include <string>

#include "groupcoord/check.h"

namespace groupcoord {
namespace cuda {

/// Environment variable naming the NCCL library file to load.
inline constexpr const char* kNcclLibraryEnv = "GROUPCOORD_NCCL_LIBRARY";
/// What is loaded when kNcclLibraryEnv is unset.
inline constexpr const char* kNcclDefaultLibrary = "libnccl.so.2";

/// Every NCCL entry point groupcoord calls, resolved with dlsym from one library.
struct NcclApi {
  /// Where the library was loaded from (the file the loader picked, when it can tell).
  std::string path;
  /// ncclGetVersion of the loaded library (e.g. 22809 for 2.28.9).
  int version = 0;

  ncclResult_t (*GetVersion)(int*) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  /// Optional (NCCL >= 2.13); nullptr when the library lacks it.
  const char* (*GetLastError)(ncclComm_t) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*CommFinalize)(ncclComm_t) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  /// Optional (NCCL >= 2.27); nullptr when the library lacks it. A communicator over the ranks
  /// not in the list (NCCL_SHRINK_DEFAULT, or NCCL_SHRINK_ABORT to stop the parent's operations
  /// first); NCCL 2.27-2.30 refuse an empty list (ncclInvalidArgument).
  ncclResult_t (*CommShrink)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*Reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t) = nullptr;
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t) = nullptr;
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;

  // Symmetric memory (NCCL >= 2.27); each nullptr when the library lacks it.
  ncclResult_t (*MemAlloc)(void**, size_t) = nullptr;
  ncclResult_t (*MemFree)(void*) = nullptr;
  ncclResult_t (*CommWindowRegister)(ncclComm_t, void*, size_t, ncclWindow_t*, int) = nullptr;
  ncclResult_t (*CommWindowDeregister)(ncclComm_t, ncclWindow_t) = nullptr;

  /// True when every symmetric-memory entry point is present.
  bool has_windows() const {
    return MemAlloc != nullptr && MemFree != nullptr && CommWindowRegister != nullptr &&
           CommWindowDeregister != nullptr;
  }
};

/// The file the process-wide NCCL is loaded from: $GROUPCOORD_NCCL_LIBRARY, else
/// "libnccl.so.2".
std::string nccl_library_path();

/// Loads NCCL from `path` (a file path, or a bare soname looked up by the dynamic loader) and
/// resolves every entry point. The library stays loaded for the life of the process. Throws
/// DistributedError naming the path (and the environment variable) when the file cannot be
/// loaded, or naming the symbol when it is not an NCCL the table can use.
NcclApi load_nccl_api(const std::string& path);

/// The process-wide NCCL: loaded from nccl_library_path() on first use (thread-safe) and logged
/// at Info with its version and file. A failed load throws (see load_nccl_api) and is retried on
/// the next call.
const NcclApi& nccl_api();

/// "ncclInvalidUsage (invalid usage)" for `result`, using the loaded library's strings when one
/// is loaded.
std::string nccl_result_text(ncclResult_t result);

}  // namespace cuda
}  // namespace groupcoord

/// Throws DistributedError when the NCCL call `expr` does not return ncclSuccess, as GC_CUDA_CHECK
/// does for CUDA (file:line, the call, NCCL's error text, the caller's message parts):
///   GC_NCCL_CHECK(api.GroupStart(), name_, " all_gatherv");
/// For NCCL calls on a communicator, use NcclComm (it watches each call against the deadline).
#define GC_NCCL_CHECK(expr, ...)                                               \
  do {                                                                         \
    const ncclResult_t gc_nccl_status_ = (expr);                               \
    if (gc_nccl_status_ != ncclSuccess) {                                      \
      ::groupcoord::detail::throw_error<::groupcoord::DistributedError>(       \
          __FILE__, __LINE__, nullptr, __VA_ARGS__, ": ", #expr,               \
          " failed: ", ::groupcoord::cuda::nccl_result_text(gc_nccl_status_)); \
    }                                                                          \
  } while (0)
