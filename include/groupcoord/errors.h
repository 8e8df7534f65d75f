// Error types thrown by groupcoord. See docs/architecture.md "Errors".
//
//   std::invalid_argument  bad arguments (Python: ValueError)
//   TimeoutError           a deadline expired (Python: TimeoutError)
//   DistributedError       a dead or misbehaving peer, a broken group (Python:
//   groupcoord.DistributedError)
#pragma once

#include <stdexcept>
#include <string>

namespace groupcoord {

/// Base of the errors that come from the distributed runtime rather than from the caller.
class DistributedError : public std::runtime_error {
 public:
  explicit DistributedError(const std::string& what) : std::runtime_error(what) {}
};

/// A blocking call ran past its deadline (store wait, Gloo operation, NCCL watchdog).
/// It derives from DistributedError so that a catch of the broad error also sees timeouts.
class TimeoutError : public DistributedError {
 public:
  explicit TimeoutError(const std::string& what) : DistributedError(what) {}
};

}  // namespace groupcoord
