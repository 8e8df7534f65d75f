#include "process_group/group_state.h"

#include <algorithm>
#include <sstream>

#include "core/shape.h"
#include "groupcoord/logging.h"

namespace groupcoord {

std::string group_label(const std::string& name, int rank, const std::vector<int>& world_ranks) {
  std::ostringstream out;
  out << "group '" << name << "' (rank " << rank << " of " << world_ranks.size() << ", world ranks "
      << detail::ranks_str(world_ranks) << ")";
  return out.str();
}

std::shared_ptr<gloo::Context> ProcessGroup::State::acquire(const char* op) {
  std::lock_guard<std::mutex> lock(mutex);
  health->check_usable(op);
  return context;
}

void ProcessGroup::State::register_op_locked(const std::shared_ptr<AsyncOp>& op, const char* what) {
  health->check_usable(what);
  std::lock_guard<std::mutex> ops_lock(ops_mutex);
  // Forget finished ops now and then so the list tracks only what may still be in flight.
  if (ops.size() >= 64 && ops.size() == ops.capacity()) {
    ops.erase(std::remove_if(ops.begin(), ops.end(),
                             [](const std::weak_ptr<AsyncOp>& weak) {
                               auto live = weak.lock();
                               return !live || live->is_completed();
                             }),
              ops.end());
  }
  ops.push_back(op);
}

void ProcessGroup::State::drain_ops(std::chrono::milliseconds bound) {
  std::vector<std::shared_ptr<AsyncOp>> pending;
  {
    std::lock_guard<std::mutex> lock(ops_mutex);
    for (auto& weak : ops) {
      if (auto op = weak.lock()) pending.push_back(std::move(op));
    }
    ops.clear();
  }
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (auto& op : pending) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (op->wait_for(std::max(left, std::chrono::milliseconds(0)))) continue;
    GC_LOG(Warn, health->label(), ": destroy: ", op->description(), " still pending after ",
           bound.count(), " ms; aborting it");
    op->abort("the group was destroyed while it was pending");
  }
  // An aborted wait returns promptly; wait for it so no waiter still uses the context after
  // destroy() returns.
  for (auto& op : pending) {
    if (!op->wait_for(std::chrono::seconds(5))) {
      GC_LOG(Warn, health->label(), ": destroy: ", op->description(),
             " did not stop after being aborted");
    }
  }
}

void ProcessGroup::State::abort_ops(const std::string& why) {
  std::vector<std::shared_ptr<AsyncOp>> pending;
  {
    std::lock_guard<std::mutex> lock(ops_mutex);
    for (auto& weak : ops) {
      if (auto op = weak.lock(); op && !op->is_completed()) pending.push_back(std::move(op));
    }
  }
  for (auto& op : pending) op->abort(why);  // without ops_mutex: abort takes the op's own lock
}

}  // namespace groupcoord
