#include "communicator/in_flight_transfers.h"

#include <algorithm>

#include "groupcoord/logging.h"

namespace groupcoord {
namespace comm {

TensorWork::TensorWork(std::shared_ptr<Work> inner, Tensor buffer)
    : inner_(std::move(inner)), buffer_(std::move(buffer)) {}

bool TensorWork::is_completed() { return inner_->is_completed(); }

void TensorWork::wait() { inner_->wait(); }

void TensorWork::wait(std::chrono::milliseconds timeout) { inner_->wait(timeout); }

void InFlightTransfers::add(std::shared_ptr<Work> work, Tensor buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  reap_locked();
  entries_.push_back(Entry{std::move(work), std::move(buffer)});
}

void InFlightTransfers::reap_locked() {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [](const Entry& e) { return e.work->is_completed(); }),
                 entries_.end());
}

void InFlightTransfers::drain(std::chrono::milliseconds timeout, const std::string& group) {
  std::vector<Entry> entries;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries.swap(entries_);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<Entry> still_running;
  for (Entry& entry : entries) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    try {
      entry.work->wait(std::max(left, std::chrono::milliseconds(0)));
    } catch (const std::exception&) {
      // A failed transfer has ended: its buffer is free to go. Its owner saw (or dropped) the
      // error through its own Work.
    }
    if (!entry.work->is_completed()) still_running.push_back(std::move(entry));
  }
  if (still_running.empty()) return;
  GC_LOG(Warn, group, " destroy: ", still_running.size(),
         " isend/irecv transfer(s) still running; keeping their buffers alive (leaked)");
  // Intentionally leaked: see the header.
  new std::vector<Entry>(std::move(still_running));
}

}  // namespace comm
}  // namespace groupcoord
