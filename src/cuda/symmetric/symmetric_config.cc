#include "cuda/symmetric/symmetric_config.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <limits>

#include "core/env_switch.h"
#include "groupcoord/check.h"

namespace groupcoord {
namespace cuda {

namespace {

std::string env_text(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// A positive byte count, or `fallback` when unset.
std::int64_t env_bytes(const char* name, std::int64_t fallback) {
  const std::string text = env_text(name);
  if (text.empty()) return fallback;
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  GC_CHECK(used == text.size() && value > 0, name, "=", text, " is not a positive number of bytes");
  return value;
}

AllReduceRouting env_routing(const char* name) {
  const std::string text = env_text(name);
  if (text.empty() || text == "table") return AllReduceRouting::Table;
  if (text == "always") return AllReduceRouting::Always;
  if (text == "never") return AllReduceRouting::Never;
  GC_THROW(std::invalid_argument, name, "=", text, " is not one of table, always, never");
}

int env_window_flags(const char* name) {
  const std::string text = env_text(name);
  if (text.empty() || text == "symmetric") return NCCL_WIN_COLL_SYMMETRIC;
  if (text == "default") return NCCL_WIN_DEFAULT;
  GC_THROW(std::invalid_argument, name, "=", text, " is not one of symmetric, default");
}

std::string version_text(int version) {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

}  // namespace

SymmetricSettings read_symmetric_settings() {
  SymmetricSettings s;
  s.requested = env_bool("GROUPCOORD_USE_NCCL_SYMM_MEM", false);
  s.batch_invariant = env_bool("GROUPCOORD_BATCH_INVARIANT", false);
  s.nccl_cumem_off = env_text("NCCL_CUMEM_ENABLE") == "0";
  s.scratch_bytes = env_bytes("GROUPCOORD_SYMM_SCRATCH_BYTES", s.scratch_bytes);
  s.scratch_max_bytes = env_bytes("GROUPCOORD_SYMM_SCRATCH_MAX_BYTES", s.scratch_max_bytes);
  s.pool_bytes = env_bytes("GROUPCOORD_SYMM_POOL_BYTES", s.pool_bytes);
  s.all_reduce = env_routing("GROUPCOORD_SYMM_ALL_REDUCE");
  s.window_flags = env_window_flags("GROUPCOORD_SYMM_WINDOW_FLAGS");
  GC_CHECK(s.scratch_bytes <= s.scratch_max_bytes,
           "GROUPCOORD_SYMM_SCRATCH_BYTES=", s.scratch_bytes,
           " exceeds GROUPCOORD_SYMM_SCRATCH_MAX_BYTES=", s.scratch_max_bytes);
  return s;
}

std::string symmetric_refusal(const SymmetricSettings& settings,
                              const SymmetricCapabilities& caps) {
  if (!settings.requested) return "GROUPCOORD_USE_NCCL_SYMM_MEM is not 1";
  if (settings.batch_invariant) return "GROUPCOORD_BATCH_INVARIANT=1 turns it off";
  if (caps.nccl_version < kMinSymmetricNcclVersion) {
    return "the loaded NCCL is " + version_text(caps.nccl_version) +
           "; symmetric kernels need NCCL >= " + version_text(kMinSymmetricNcclVersion) +
           " (older ones corrupt data)";
  }
  if (!caps.has_window_api) return "the loaded NCCL has no ncclMemAlloc / ncclCommWindowRegister";
  if (settings.nccl_cumem_off) return "NCCL_CUMEM_ENABLE=0 (windows need cuMem allocations)";
  if (!caps.cumem_supported) return "the device does not support cuMem (virtual memory management)";
  if (!caps.window_probe.empty()) {
    std::string why = std::string("NCCL cannot register a ") +
                      window_flags_name(settings.window_flags) + " window on this GPU (" +
                      caps.window_probe + ")";
    if (settings.window_flags == NCCL_WIN_COLL_SYMMETRIC) {
      why +=
          "; this NCCL may lack symmetric kernels for the GPU: "
          "GROUPCOORD_SYMM_WINDOW_FLAGS=default registers plain windows instead";
    }
    return why;
  }
  return "";
}

bool device_supports_cumem(int device_index) {
  using GetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &fn, 12000, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || fn == nullptr) {
    cudaGetLastError();  // do not leave a sticky-looking error behind
    return false;
  }
  int supported = 0;
  const CUresult result = reinterpret_cast<GetAttribute>(fn)(
      &supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device_index);
  return result == CUDA_SUCCESS && supported != 0;
}

bool all_reduce_takes_symmetric_path(AllReduceRouting mode, int world_size, std::int64_t bytes) {
  if (mode == AllReduceRouting::Always) return true;
  if (mode == AllReduceRouting::Never) return false;
  constexpr std::int64_t kKiB = 1024;
  if (world_size < 4) return false;
  if (world_size == 4) return bytes <= 16 * kKiB || bytes >= 512 * kKiB;
  if (world_size == 8) return bytes <= 16 * kKiB || bytes >= 128 * kKiB;
  return world_size > 8;
}

bool symmetric_reduction_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float8E4M3:
    case DType::Float8E5M2:
      return true;
    default:
      return false;
  }
}

const char* window_flags_name(int flags) {
  return flags == NCCL_WIN_COLL_SYMMETRIC ? "symmetric" : "default";
}

const char* all_reduce_routing_name(AllReduceRouting mode) {
  switch (mode) {
    case AllReduceRouting::Always:
      return "always";
    case AllReduceRouting::Never:
      return "never";
    default:
      return "table";
  }
}

}  // namespace cuda
}  // namespace groupcoord
