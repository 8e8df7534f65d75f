// A process-wide record of NCCL communicator aborts. A host wait that knows nothing about
// communicators (a stream synchronisation behind a device-to-host copy) may end only because the
// watchdog aborted NCCL kernels ahead of it in the stream; the data it then returns is garbage.
// Such waits compare the abort generation before and after, and raise instead of returning it.
#pragma once

#include <cstdint>
#include <string>

namespace groupcoord {
namespace cuda {

/// Number of communicator aborts so far in this process.
std::uint64_t abort_generation();

/// Records an abort (called by NcclComm when it aborts); `reason` names the group and the op.
void record_abort(const std::string& reason);

/// The reason given with the latest abort ("" before the first).
std::string last_abort_reason();

/// Throws DistributedError naming `what` when an abort happened since `generation` was read.
void throw_if_aborted_since(std::uint64_t generation, const std::string& what);

}  // namespace cuda
}  // namespace groupcoord
