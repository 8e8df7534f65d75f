#include "process_group/waiter_pool.h"

#include <exception>

#include "groupcoord/logging.h"

namespace groupcoord {

WaiterPool::WaiterPool(std::chrono::milliseconds idle_exit) : idle_exit_(idle_exit) {}

WaiterPool::~WaiterPool() {
  std::list<Worker> workers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    work_ready_.notify_all();
    workers.swap(workers_);
  }
  // Workers only touch their own node of the list, which std::list keeps stable after the swap.
  for (auto& worker : workers) {
    if (worker.thread.joinable()) worker.thread.join();
  }
}

void WaiterPool::submit(std::function<void()> task) {
  std::list<Worker> exited;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
    if (idle_ >= queue_.size()) {
      work_ready_.notify_one();
    } else {
      workers_.emplace_back();
      Worker* worker = &workers_.back();
      worker->thread = std::thread([this, worker] { worker_loop(worker); });
    }
    join_exited_locked(exited);
  }
  // Joining retired threads outside the lock: they have already left worker_loop.
  for (auto& worker : exited) worker.thread.join();
}

std::size_t WaiterPool::thread_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t alive = 0;
  for (const auto& worker : workers_) alive += worker.exited ? 0 : 1;
  return alive;
}

void WaiterPool::join_exited_locked(std::list<Worker>& exited) {
  for (auto it = workers_.begin(); it != workers_.end();) {
    auto next = std::next(it);
    if (it->exited) exited.splice(exited.end(), workers_, it);
    it = next;
  }
}

void WaiterPool::worker_loop(Worker* self) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    ++idle_;
    const bool woke =
        work_ready_.wait_for(lock, idle_exit_, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) {
      // Stopping, or idle for too long: retire. The destructor (or the next submit) joins us.
      if (stopping_ || !woke) break;
      continue;
    }
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (const std::exception& e) {
      GC_LOG(Error, "process group waiter: task threw: ", e.what());
    } catch (...) {
      GC_LOG(Error, "process group waiter: task threw a non-standard exception");
    }
    task = nullptr;  // release what the task captured before sleeping
    lock.lock();
  }
  self->exited = true;
}

}  // namespace groupcoord
