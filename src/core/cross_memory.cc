#include "core/cross_memory.h"

#include <sys/uio.h>

#include <cerrno>

namespace groupcoord {
namespace shm {

bool read_peer_memory(pid_t pid, const void* remote, void* local, std::size_t bytes) {
  std::size_t done = 0;
  while (done < bytes) {
    iovec to{static_cast<char*>(local) + done, bytes - done};
    iovec from{const_cast<char*>(static_cast<const char*>(remote)) + done, bytes - done};
    const ssize_t n = ::process_vm_readv(pid, &to, 1, &from, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

const std::uint64_t* cross_memory_probe() {
  static const std::uint64_t probe = kCrossMemoryProbe;
  return &probe;
}

}  // namespace shm
}  // namespace groupcoord
