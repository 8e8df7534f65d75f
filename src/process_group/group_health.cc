#include "process_group/group_health.h"

#include "groupcoord/check.h"
#include "groupcoord/errors.h"

namespace groupcoord {

void GroupHealth::check_usable(const char* op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (destroyed_) {
    if (destroyed_why_.empty()) {
      GC_THROW(DistributedError, label_, ": ", op, " called after the group was destroyed");
    }
    GC_THROW(DistributedError, label_, ": ", op, " called after the group was destroyed (",
             destroyed_why_, ")");
  }
  if (broken_) {
    // Gloo closes every connection of a context after an error, so a retry could only hang or
    // fail obscurely; fail at once with the original cause instead.
    GC_THROW(DistributedError, label_, " is broken after an earlier error (", op,
             " refused): ", reason_);
  }
}

void GroupHealth::mark_broken(const std::string& reason) {
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_) return;  // keep the first cause: later errors are usually its echoes
    broken_ = true;
    reason_ = reason;
    hook = std::move(on_break_);
  }
  if (hook) hook(reason);
}

void GroupHealth::on_first_break(std::function<void(const std::string&)> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_break_ = std::move(hook);
}

void GroupHealth::mark_destroyed(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  destroyed_ = true;
  destroyed_why_ = why;
}

bool GroupHealth::is_broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

bool GroupHealth::is_destroyed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return destroyed_;
}

}  // namespace groupcoord
