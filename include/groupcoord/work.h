// Handle of an asynchronous point-to-point operation (ProcessGroup::isend / irecv).
#pragma once

#include <chrono>

namespace groupcoord {

/// Handle of an in-flight isend/irecv. The operation progresses on its own (a waiter thread
/// drives it to completion), so a Work may be polled, waited on, or simply dropped: dropping it
/// never blocks and never cancels the transfer. The buffer passed to isend/irecv must stay valid
/// until is_completed() is true (or wait() has returned or thrown).
///
/// Thread-safe: any thread may call any method at any time.
class Work {
 public:
  virtual ~Work();

  /// True only once the transfer has finished (successfully or with an error). Never blocks;
  /// reliable enough to reap retained sends by polling it.
  virtual bool is_completed() = 0;

  /// Waits for the transfer, up to the owning group's timeout. Rethrows the operation's error
  /// (TimeoutError, DistributedError); throws TimeoutError when the wait itself runs out.
  virtual void wait() = 0;

  /// As wait(), with an explicit bound. A wait that runs out leaves the operation running:
  /// it may still complete later.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
};

}  // namespace groupcoord
