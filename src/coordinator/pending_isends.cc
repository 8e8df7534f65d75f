#include "coordinator/pending_isends.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace groupcoord {
namespace coordinator_detail {

void PendingIsends::push(std::vector<std::shared_ptr<Work>> handles, std::vector<Tensor> tensors) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.push_back(Entry{std::move(handles), std::move(tensors)});
}

void PendingIsends::reap() {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!entries_.empty()) {
    const auto& handles = entries_.front().handles;
    const bool done = std::all_of(handles.begin(), handles.end(),
                                  [](const std::shared_ptr<Work>& h) { return h->is_completed(); });
    if (!done) break;
    entries_.pop_front();
  }
}

void PendingIsends::drop(const std::vector<std::shared_ptr<Work>>& handles) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->handles == handles) {
      entries_.erase(std::next(it).base());
      return;
    }
  }
}

void PendingIsends::clear() {
  std::deque<Entry> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(entries_);
  }
}

std::size_t PendingIsends::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace coordinator_detail
}  // namespace groupcoord
