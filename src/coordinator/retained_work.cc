#include "coordinator/retained_work.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"

namespace groupcoord {
namespace coordinator_detail {

namespace {

using Clock = std::chrono::steady_clock;

bool all_completed(const std::vector<std::shared_ptr<Work>>& works) {
  return std::all_of(works.begin(), works.end(),
                     [](const std::shared_ptr<Work>& w) { return w->is_completed(); });
}

// Transfers whose handle was dropped before they finished, with their buffers.
struct Orphan {
  std::vector<std::shared_ptr<Work>> works;
  KeepAlive keep_alive;
};

struct Orphanage {
  std::mutex mutex;
  std::vector<Orphan> orphans;

  // Frees the buffers of finished orphans; the caller holds the mutex.
  void reap_locked() {
    orphans.erase(std::remove_if(orphans.begin(), orphans.end(),
                                 [](const Orphan& o) { return all_completed(o.works); }),
                  orphans.end());
  }
};

// Leaked on purpose: transfers may still be running while static objects are destroyed at exit,
// and their buffers must not be freed under them then.
Orphanage& orphanage() {
  static Orphanage* instance = new Orphanage;
  return *instance;
}

}  // namespace

RetainedWork::RetainedWork(std::vector<std::shared_ptr<Work>> works, KeepAlive keep_alive)
    : works_(std::move(works)), keep_alive_(std::move(keep_alive)) {
  for (const auto& w : works_) GC_ASSERT(w != nullptr, "RetainedWork: null Work");
  Orphanage& o = orphanage();
  std::lock_guard<std::mutex> lock(o.mutex);
  o.reap_locked();
}

RetainedWork::~RetainedWork() {
  try {
    Orphanage& o = orphanage();
    std::lock_guard<std::mutex> lock(o.mutex);
    o.reap_locked();
    if (!all_completed(works_)) {
      o.orphans.reserve(o.orphans.size() + 1);  // may throw; nothing has moved yet
      o.orphans.push_back(Orphan{std::move(works_), std::move(keep_alive_)});
    }
  } catch (...) {
    // Out of memory while adopting: leak the buffers rather than free them under a transfer.
    new KeepAlive(std::move(keep_alive_));
  }
}

bool RetainedWork::is_completed() { return all_completed(works_); }

void RetainedWork::wait() {
  for (const auto& w : works_) w->wait();
}

void RetainedWork::wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (const auto& w : works_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    w->wait(std::max(left, std::chrono::milliseconds(0)));
  }
}

std::shared_ptr<Work> retain(std::shared_ptr<Work> work, KeepAlive keep_alive) {
  std::vector<std::shared_ptr<Work>> works;
  works.push_back(std::move(work));
  return std::make_shared<RetainedWork>(std::move(works), std::move(keep_alive));
}

std::size_t orphaned_transfer_count() {
  Orphanage& o = orphanage();
  std::lock_guard<std::mutex> lock(o.mutex);
  o.reap_locked();
  return o.orphans.size();
}

}  // namespace coordinator_detail
}  // namespace groupcoord
