// Whether a communicator uses NCCL symmetric memory, and with which sizes (docs/cuda.md).
//
// Each rank reads its environment (read_symmetric_settings) and its capabilities (the NCCL it
// loaded, the device's cuMem support); symmetric_refusal() turns both into "" (use it) or the
// reason not to. SymmetricMemory then makes the ranks agree, because NCCL picks a symmetric kernel
// per rank and routing must be identical everywhere: one rank refusing, or ranks configured with
// different sizes, turns the path off on every rank (with the reason logged).
//
//   GROUPCOORD_USE_NCCL_SYMM_MEM=1         turns the path on (off by default, as in vLLM)
//   GROUPCOORD_BATCH_INVARIANT=1           turns it off (custom collectives change reduction order)
//   GROUPCOORD_SYMM_SCRATCH_BYTES=N        first scratch window size (default 64 MiB)
//   GROUPCOORD_SYMM_SCRATCH_MAX_BYTES=N    growth limit; larger calls take the regular path
//                                          (default 1 GiB)
//   GROUPCOORD_SYMM_POOL_BYTES=N           size of each window backing symmetric_empty (64 MiB)
//   GROUPCOORD_SYMM_ALL_REDUCE=table|always|never
//                                          all_reduce routing: vLLM's table (default), or forced
//   GROUPCOORD_SYMM_WINDOW_FLAGS=symmetric|default
//                                          NCCL_WIN_COLL_SYMMETRIC windows (default), or plain
//                                          NCCL_WIN_DEFAULT windows for an NCCL without symmetric
//                                          kernels for this GPU (registered buffers, same
//                                          routing, no symmetric kernels)
//   NCCL_CUMEM_ENABLE=0                    NCCL without cuMem: refused (windows need cuMem memory)
#pragma once

#include <cstdint>
#include <string>

#include "groupcoord/dtype.h"

namespace groupcoord {
namespace cuda {

/// The oldest NCCL whose symmetric kernels are correct (2.28.3 corrupts data; fixed in 2.28.7).
inline constexpr int kMinSymmetricNcclVersion = 22807;

/// How all_reduce is routed through the scratch window.
enum class AllReduceRouting : std::int64_t { Table = 0, Always = 1, Never = 2 };

/// One rank's configuration, read from its environment.
struct SymmetricSettings {
  bool requested = false;        ///< GROUPCOORD_USE_NCCL_SYMM_MEM=1
  bool batch_invariant = false;  ///< GROUPCOORD_BATCH_INVARIANT=1
  bool nccl_cumem_off = false;   ///< NCCL_CUMEM_ENABLE=0
  std::int64_t scratch_bytes = 64ll << 20;
  std::int64_t scratch_max_bytes = 1ll << 30;
  std::int64_t pool_bytes = 64ll << 20;
  AllReduceRouting all_reduce = AllReduceRouting::Table;
  /// NCCL_WIN_COLL_SYMMETRIC, or NCCL_WIN_DEFAULT with GROUPCOORD_SYMM_WINDOW_FLAGS=default.
  int window_flags = 1;
};

/// What this process can do, independent of the environment.
struct SymmetricCapabilities {
  int nccl_version = 0;          ///< ncclGetVersion of the loaded library
  bool has_window_api = false;   ///< ncclMemAlloc and ncclCommWindowRegister are present
  bool cumem_supported = false;  ///< the device supports virtual memory management (cuMem)
  /// "" when a window with the settings' flags registered on a probe communicator, else why not
  /// (symmetric_probe.h).
  std::string window_probe;
};

/// Reads the variables above. Throws std::invalid_argument naming the variable for a value that
/// is not a positive integer (sizes) or not one of the listed words.
SymmetricSettings read_symmetric_settings();

/// "" when the symmetric path may be used with `settings` and `caps`, else the reason it is not
/// (naming the variable, the version or the capability).
std::string symmetric_refusal(const SymmetricSettings& settings, const SymmetricCapabilities& caps);

/// Whether this device supports cuMem (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED),
/// asked through the driver entry point so that nothing links libcuda. False when it cannot tell.
bool device_supports_cumem(int device_index);

/// vLLM's all_reduce table for symmetric memory: below 4 ranks never; at 4 ranks for at most
/// 16 KiB or at least 512 KiB; at 8 ranks for at most 16 KiB or at least 128 KiB; above 8
/// always; other sizes never. `mode` forces the answer either way.
bool all_reduce_takes_symmetric_path(AllReduceRouting mode, int world_size, std::int64_t bytes);

/// True for the dtypes NCCL's symmetric reduction kernels implement (sum on f32, f16, bf16 and
/// the fp8 types); reduce_scatter and all_reduce of other dtypes stay on the regular path.
bool symmetric_reduction_dtype(DType dtype);

/// "symmetric" (NCCL_WIN_COLL_SYMMETRIC) or "default" (NCCL_WIN_DEFAULT).
const char* window_flags_name(int flags);

/// "table", "always" or "never".
const char* all_reduce_routing_name(AllReduceRouting mode);

}  // namespace cuda
}  // namespace groupcoord
