// Buffers of asynchronous point-to-point transfers, kept alive until the transfer ends.
//
// A Work may be dropped before its transfer finishes (work.h: dropping never cancels it), and
// isend may send a contiguous copy the caller never sees, so the communicator itself must own
// every buffer a transfer still reads or writes.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "groupcoord/tensor.h"
#include "groupcoord/work.h"

namespace groupcoord {
namespace comm {

/// The Work returned by the communicator's isend/irecv: the ProcessGroup's Work plus a reference
/// to the tensor being transferred.
class TensorWork final : public Work {
 public:
  /// `inner` is the ProcessGroup's handle; `buffer` the memory it reads or writes.
  TensorWork(std::shared_ptr<Work> inner, Tensor buffer);
  /// True once the transfer has finished (successfully or not).
  bool is_completed() override;
  /// Waits up to the group's timeout; rethrows the transfer's error.
  void wait() override;
  /// Waits up to `timeout`; rethrows the transfer's error.
  void wait(std::chrono::milliseconds timeout) override;

 private:
  std::shared_ptr<Work> inner_;
  Tensor buffer_;
};

/// The in-flight transfers of one communicator. Thread-safe (isend/irecv may come from any
/// thread).
class InFlightTransfers {
 public:
  /// Remembers a transfer until it completes; forgets those that have completed meanwhile.
  void add(std::shared_ptr<Work> work, Tensor buffer);

  /// Waits, up to `timeout` in all, for the remaining transfers. The buffers of transfers still
  /// running after that are leaked on purpose (and logged, naming `group`): freeing memory a
  /// transfer may still write would be worse than a leak at shutdown.
  void drain(std::chrono::milliseconds timeout, const std::string& group);

 private:
  struct Entry {
    std::shared_ptr<Work> work;
    Tensor buffer;
  };
  /// Drops the entries whose transfer has completed; requires mutex_.
  void reap_locked();

  std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace comm
}  // namespace groupcoord
