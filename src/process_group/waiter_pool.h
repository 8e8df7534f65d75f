// A pool of threads that drive asynchronous Gloo transfers to completion.
//
// Gloo's UnboundBuffer has no non-destructive "test": the only way to learn that a send or recv
// finished is to block in waitSend/waitRecv (and a wait that times out tears the whole context
// down, so short polling waits are not an option). Each outstanding isend/irecv therefore needs
// a thread blocked on it. The pool grows to the number of outstanding operations and idle
// threads retire after a while, so a burst of 100 retained sends costs 100 threads only while it
// lasts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace groupcoord {

/// Growable thread pool: a submitted task starts at once (on an idle thread or a new one).
/// Tasks may block for long; they must not throw (exceptions are logged and dropped).
class WaiterPool {
 public:
  /// Idle threads exit after `idle_exit` without work.
  explicit WaiterPool(std::chrono::milliseconds idle_exit = std::chrono::seconds(10));
  /// Joins every thread once the queued and running tasks have returned; the owner must make
  /// blocked tasks return first (abort their waits).
  ~WaiterPool();
  WaiterPool(const WaiterPool&) = delete;
  WaiterPool& operator=(const WaiterPool&) = delete;

  /// Runs `task` on a pool thread, starting a new thread when none is idle.
  void submit(std::function<void()> task);

  /// Threads currently alive (for tests and diagnostics).
  std::size_t thread_count() const;

 private:
  struct Worker {
    std::thread thread;
    bool exited = false;
  };

  void worker_loop(Worker* self);
  void join_exited_locked(std::list<Worker>& exited);

  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<std::function<void()>> queue_;
  std::list<Worker> workers_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace groupcoord
