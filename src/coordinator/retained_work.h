// RetainedWork: a Work that groups several transfers (e.g. an object's size and payload) and
// keeps the buffers they read or write alive while they are in flight.
//
// ProcessGroup::isend/irecv require their buffer to outlive the transfer but their Work does not
// own it. The coordinator hands out RetainedWork instead, so a caller may drop a handle at any
// time: if the transfers are still running then, the handle's buffers move to a process-wide
// list of orphaned transfers, freed once those transfers complete (checked whenever a
// RetainedWork is created or dropped), instead of being freed under Gloo's feet.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "groupcoord/work.h"

namespace groupcoord {
namespace coordinator_detail {

/// Buffers a transfer reads or writes (a Tensor, Bytes, ... behind a shared pointer).
using KeepAlive = std::vector<std::shared_ptr<const void>>;

/// See the file comment. Thread-safe as Work requires.
class RetainedWork final : public Work {
 public:
  /// `works` complete in any order; wait() waits for them in the given order.
  RetainedWork(std::vector<std::shared_ptr<Work>> works, KeepAlive keep_alive);
  /// Hands unfinished transfers and their buffers to the orphan list; never blocks.
  ~RetainedWork() override;
  RetainedWork(const RetainedWork&) = delete;
  RetainedWork& operator=(const RetainedWork&) = delete;

  /// True once every grouped transfer has finished (successfully or not).
  bool is_completed() override;
  /// Waits for each transfer in turn (each bounded by its group's timeout); rethrows the first
  /// error.
  void wait() override;
  /// As wait(), all of it within `timeout`; TimeoutError when that runs out.
  void wait(std::chrono::milliseconds timeout) override;

 private:
  std::vector<std::shared_ptr<Work>> works_;
  KeepAlive keep_alive_;
};

/// Wraps one transfer and the buffer it uses.
std::shared_ptr<Work> retain(std::shared_ptr<Work> work, KeepAlive keep_alive);

/// Number of orphaned transfers still in flight (for tests and diagnostics).
std::size_t orphaned_transfer_count();

}  // namespace coordinator_detail
}  // namespace groupcoord
