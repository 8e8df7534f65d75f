// Whether the loaded NCCL can register a window on this GPU at all. A failed
// ncclCommWindowRegister is reported asynchronously and poisons the communicator it was made on
// (seen on the H200 host: the torch NCCL 2.28.9 wheel has no symmetric kernels for sm_90 and
// fails with "named symbol not found"), so it must be found out before a real communicator
// tries: once per process, device and window flags, on a private one-rank communicator that is
// thrown away afterwards.
#pragma once

#include <string>

#include "cuda/nccl/nccl_api.h"
#include "groupcoord/device.h"

namespace groupcoord {
namespace cuda {

/// "" when a window with `flags` (NCCL_WIN_COLL_SYMMETRIC or NCCL_WIN_DEFAULT) can be registered
/// on `device`, else what failed. Thread-safe; the answer is cached for the process.
std::string probe_window_registration(const NcclApi& api, Device device, int flags);

}  // namespace cuda
}  // namespace groupcoord
