// Error types thrown by groupcoord. See docs/architecture.md "Errors".
//
//   std::invalid_argument  bad arguments (Python: ValueError)
//   TimeoutError           a deadline expired (Python: TimeoutError)
//   DistributedError       a dead or misbehaving peer, a broken group (Python:
//   groupcoord.DistributedError)
//   RankFailureError       a DistributedError that names the world ranks found dead (only under
//                          RankFailurePolicy::kIdentify, world.h; Python:
//                          groupcoord.RankFailureError)
//   SourceFailedError      a DistributedError: the rank this one waited for failed before sending
//                          and said why (Python: groupcoord.SourceFailedError)
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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

/// A collective failed and the world ranks in dead_ranks() were found dead (their processes are
/// gone). Thrown instead of the original error under RankFailurePolicy::kIdentify, so that an
/// engine can catch it, call shrink_model_parallel(dead_ranks()) and go on (docs/elastic.md).
class RankFailureError : public DistributedError {
 public:
  RankFailureError(const std::string& what, std::vector<int> dead_ranks)
      : DistributedError(what), dead_ranks_(std::move(dead_ranks)) {}
  /// World ranks (as numbered before any shrink this error leads to), ascending.
  const std::vector<int>& dead_ranks() const { return dead_ranks_; }

 private:
  std::vector<int> dead_ranks_;
};

/// The rank this one was receiving from (the source of a broadcast or a point-to-point send, a
/// queue's writer) could not produce what it would send and sent its error instead
/// (GroupCoordinator::*_failed, MessageQueue::enqueue_error). Nobody died and the group stays in
/// step, so the rank-failure policy leaves it as it is.
class SourceFailedError : public DistributedError {
 public:
  SourceFailedError(const std::string& what, int src, std::string why)
      : DistributedError(what), src_(src), why_(std::move(why)) {}
  /// The source's group rank (a queue's writer: its rank in the queue's group; -1 for an external
  /// writer).
  int src() const { return src_; }
  /// The source's own text.
  const std::string& why() const { return why_; }

 private:
  int src_;
  std::string why_;
};

}  // namespace groupcoord
