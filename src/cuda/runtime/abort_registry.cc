#include "cuda/runtime/abort_registry.h"

#include <atomic>
#include <mutex>

#include "groupcoord/check.h"

namespace groupcoord {
namespace cuda {

namespace {

std::atomic<std::uint64_t> generation{0};

struct LastReason {
  std::mutex mutex;
  std::string text;
};

LastReason& last_reason() {
  static auto* reason = new LastReason();  // never destroyed: aborts can happen at exit
  return *reason;
}

}  // namespace

std::uint64_t abort_generation() { return generation.load(); }

void record_abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(last_reason().mutex);
    last_reason().text = reason;
  }
  generation.fetch_add(1);
}

std::string last_abort_reason() {
  std::lock_guard<std::mutex> lock(last_reason().mutex);
  return last_reason().text;
}

void throw_if_aborted_since(std::uint64_t seen, const std::string& what) {
  if (abort_generation() == seen) return;
  GC_THROW(DistributedError, what, ": an NCCL communicator was aborted while waiting (",
           last_abort_reason(), "); the data may be incomplete");
}

}  // namespace cuda
}  // namespace groupcoord
