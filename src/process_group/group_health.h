// Whether a process group can still be used. Shared between the group and its in-flight async
// operations, so that an error seen by a waiter thread breaks the group for every later caller.
#pragma once

#include <functional>
#include <mutex>
#include <string>

namespace groupcoord {

/// Broken/destroyed flags of one group plus the label that every error message starts with.
/// Thread-safe.
class GroupHealth {
 public:
  /// `label` names the group in messages, e.g. "group 'tp:0' (rank 1 of 2, world ranks [2, 3])".
  explicit GroupHealth(std::string label) : label_(std::move(label)) {}

  /// The label given at construction.
  const std::string& label() const { return label_; }

  /// Throws DistributedError when the group is broken or destroyed; `op` names the refused call.
  void check_usable(const char* op) const;

  /// Records the first transport error; later calls fail fast with it. The first time, runs the
  /// hook given to on_first_break (outside the lock).
  void mark_broken(const std::string& reason);
  /// `hook` runs once, with the reason, on the thread that first marks the group broken. The
  /// process group aborts its pending transfers and closes its Gloo connections there, so that
  /// peers blocked on this rank fail at once instead of at their deadline (a failure spreads
  /// through the group as an NCCL abort does).
  void on_first_break(std::function<void(const std::string&)> hook);
  /// Records that destroy() ran; `why`, when given, is added to every later refusal (e.g. "it
  /// was shrunk without world ranks [2]; use the group that shrink returned").
  void mark_destroyed(const std::string& why = {});

  bool is_broken() const;
  bool is_destroyed() const;

 private:
  const std::string label_;
  mutable std::mutex mutex_;
  bool broken_ = false;
  bool destroyed_ = false;
  std::string reason_;
  std::string destroyed_why_;
  std::function<void(const std::string&)> on_break_;
};

}  // namespace groupcoord
