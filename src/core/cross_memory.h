// Reading another process's memory directly (Linux cross-memory attach, process_vm_readv): one
// copy from a peer's buffer into ours instead of two through a shared segment, which is what Open
// MPI's shared-memory transport does for large messages. Allowed between processes of the same
// user unless the kernel restricts ptrace (Yama's ptrace_scope, containers without the
// capability); callers probe it once and fall back to shared memory when it is refused.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace groupcoord {
namespace shm {

/// Copies `bytes` from `remote` in process `pid` to `local`. False (errno set) when the kernel
/// refuses or the process is gone; never a partial copy reported as success.
bool read_peer_memory(pid_t pid, const void* remote, void* local, std::size_t bytes);

/// An address in this process holding kCrossMemoryProbe, for peers to test read_peer_memory.
const std::uint64_t* cross_memory_probe();
constexpr std::uint64_t kCrossMemoryProbe = 0x67632d636d612d31ULL;  // "gc-cma-1"

}  // namespace shm
}  // namespace groupcoord
