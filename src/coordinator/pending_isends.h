// The self-retention FIFO of isend_tensor_dict (vLLM's _pending_isends): one entry per call, with
// the call's handles and the tensors it sent, so fire-and-forget callers that drop the handles
// cannot free or overwrite the send buffers while the sends are in flight.
//
// Reaping (before each new isend_tensor_dict) drops entries oldest first while all of an
// entry's handles report is_completed(); it stops at the first unfinished one, since later sends
// to the same peer are no further along. vLLM gates on the tensor handles only, because gloo's
// Work.is_completed() is unreliable for its metadata send, and drops metadata-only entries
// blindly; ProcessGroup's Work::is_completed() is reliable, so every entry, metadata-only ones
// included, is gated on all of its handles and reaping never blocks.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "groupcoord/tensor.h"
#include "groupcoord/work.h"

namespace groupcoord {
namespace coordinator_detail {

/// See the file comment. Thread-safe.
class PendingIsends {
 public:
  /// Appends one call's handles (metadata first) and the tensors they read.
  void push(std::vector<std::shared_ptr<Work>> handles, std::vector<Tensor> tensors);
  /// Drops completed entries, oldest first; never blocks.
  void reap();
  /// Drops the entry holding exactly `handles`, searching from the newest (send_tensor_dict
  /// after waiting for its own sends).
  void drop(const std::vector<std::shared_ptr<Work>>& handles);
  /// Drops every entry (after the groups are destroyed, when no transfer can be running).
  void clear();
  /// Number of entries.
  std::size_t size() const;

 private:
  struct Entry {
    std::vector<std::shared_ptr<Work>> handles;
    std::vector<Tensor> tensors;
  };

  mutable std::mutex mutex_;
  std::deque<Entry> entries_;
};

}  // namespace coordinator_detail
}  // namespace groupcoord
