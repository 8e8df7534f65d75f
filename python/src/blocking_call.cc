// The helper-thread runner behind run_blocking (see blocking_call.h).
//
// Hand-off protocol, per call on the main thread:
//   main:   task -> worker slot, wake the worker if it sleeps, release the GIL, wait for the task
//           (optionally spin, then sleep on a futex in short slices, checking signals)
//   worker: optionally spin for the next task after each one, then sleep on a futex
// Both sleep flags follow the "store my flag, then re-check the other side" order with
// sequentially consistent atomics, so a wake-up is never lost.
#include "blocking_call.h"

#include <linux/futex.h>
#include <pthread.h>
#include <pybind11/pybind11.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include "groupcoord/logging.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

using Clock = std::chrono::steady_clock;

/// How often a waiting main thread runs Python's signal handlers.
constexpr auto kSignalCheckInterval = std::chrono::milliseconds(50);
/// How long the main thread spins (yielding) before sleeping on the task
/// (GROUPCOORD_PY_SPIN_US). Default 0: on a machine with few cores per rank, spinning steals the
/// CPU the peers need and costs far more than a futex wake-up (measured on 2 cores, 2 ranks).
std::chrono::microseconds g_completion_spin{0};
/// How long an idle helper spins (yielding) for the next call before sleeping
/// (GROUPCOORD_PY_IDLE_SPIN_US).
std::chrono::microseconds g_idle_spin{0};

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                const struct timespec* timeout) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, timeout,
          nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr,
          nullptr, 0);
}

enum TaskState : std::uint32_t { kPending = 0, kDone = 1, kAbandoned = 2 };

/// One call handed to a helper thread.
struct Task {
  std::function<void()> body;
  std::exception_ptr error;
  /// Futex word: kPending until the helper finishes or the caller abandons it.
  std::atomic<std::uint32_t> state{kPending};
  std::atomic<bool> waiter_sleeping{false};
  /// The helper's reference, taken over by the helper when it starts: keeps the task alive while
  /// the helper still touches it, even after the caller has returned.
  std::shared_ptr<Task> helper_ref;
};

std::atomic<int> g_abandoned_in_flight{0};

/// Runs the body, records the outcome and wakes the caller; on an abandoned task, only logs.
void execute(Task& task) {
  try {
    task.body();
  } catch (...) {
    task.error = std::current_exception();
  }
  // Release the captures here, before the caller can see the outcome and return.
  task.body = nullptr;
  std::uint32_t expected = kPending;
  if (task.state.compare_exchange_strong(expected, kDone)) {
    if (task.waiter_sleeping.load()) futex_wake(&task.state);
    return;
  }
  g_abandoned_in_flight.fetch_sub(1);
  if (task.error) {
    try {
      std::rethrow_exception(task.error);
    } catch (const std::exception& e) {
      GC_LOG(Info, "groupcoord (python): a call interrupted earlier ended with: ", e.what());
    } catch (...) {
    }
  }
}

/// A helper thread with a one-task mailbox. Detached: it owns itself through a shared_ptr.
class Worker {
 public:
  static std::shared_ptr<Worker> start() {
    auto worker = std::make_shared<Worker>();
    std::thread([worker] { worker->loop(); }).detach();
    return worker;
  }

  /// Hands `task` over (the mailbox is empty: one call at a time per worker).
  void post(const std::shared_ptr<Task>& task) {
    task->helper_ref = task;
    slot_.store(task.get());
    posts_.fetch_add(1);
    if (sleeping_.load()) futex_wake(&posts_);
  }

  /// Makes the thread exit once its current task is over (it is busy with an abandoned call).
  void retire() {
    retired_.store(true);
    posts_.fetch_add(1);
    futex_wake(&posts_);
  }

 private:
  void loop() {
    for (;;) {
      Task* task = next_task();
      if (task == nullptr) return;
      std::shared_ptr<Task> hold = std::move(task->helper_ref);
      execute(*task);
      if (retired_.load()) return;
    }
  }

  Task* next_task() {
    const Clock::time_point spin_end = Clock::now() + g_idle_spin;
    while (Clock::now() < spin_end) {
      if (Task* task = slot_.exchange(nullptr)) return task;
      if (retired_.load()) return nullptr;
      sched_yield();
    }
    for (;;) {
      const std::uint32_t seen = posts_.load();
      sleeping_.store(true);
      Task* task = slot_.exchange(nullptr);
      if (task != nullptr || retired_.load()) {
        sleeping_.store(false);
        return task;
      }
      futex_wait(&posts_, seen, nullptr);
      sleeping_.store(false);
    }
  }

  std::atomic<Task*> slot_{nullptr};
  std::atomic<std::uint32_t> posts_{0};  // futex word, bumped on every post and on retire
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> retired_{false};
};

// Touched only with the GIL held (on the main thread).
std::shared_ptr<Worker> g_worker;
unsigned long g_main_thread = 0;
bool g_interruptible_waits = true;
bool g_interruptible_collectives = false;
bool g_in_wait = false;  // a signal handler run from the wait loop calls inline

bool on_main_thread() { return PyThread_get_thread_ident() == g_main_thread; }

/// In a forked child the helper thread does not exist: forget it (leaked) so that the next call
/// starts a new one instead of waiting for a thread that will never run.
void forget_worker_after_fork() {
  new std::shared_ptr<Worker>(std::move(g_worker));  // never destroyed: the child has no thread
}

/// Waits without the GIL (`*gil_state` is the saved thread state) until the task is over.
/// Returns false when a signal handler raised (the Python error is set).
bool wait_for(Task& task, PyThreadState** gil_state) {
  const Clock::time_point spin_end = Clock::now() + g_completion_spin;
  while (Clock::now() < spin_end) {
    if (task.state.load() != kPending) return true;
    sched_yield();
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kSignalCheckInterval);
  const struct timespec slice {
    static_cast<time_t>(ns.count() / 1000000000), static_cast<long>(ns.count() % 1000000000)
  };
  for (;;) {
    task.waiter_sleeping.store(true);
    if (task.state.load() == kPending) futex_wait(&task.state, kPending, &slice);
    task.waiter_sleeping.store(false);
    if (task.state.load() != kPending) return true;
    PyEval_RestoreThread(*gil_state);
    const bool raised = PyErr_CheckSignals() != 0;
    *gil_state = PyEval_SaveThread();
    if (raised) return false;
  }
}

void run_inline(const std::function<void()>& body) {
  py::gil_scoped_release release;
  body();
}

/// Marks the task abandoned (unless it just finished) and retires its busy worker.
void abandon(Task& task) {
  std::uint32_t expected = kPending;
  if (!task.state.compare_exchange_strong(expected, kAbandoned)) return;
  g_abandoned_in_flight.fetch_add(1);
  g_worker->retire();
  g_worker.reset();
}

bool offloaded(BlockingKind kind) {
  switch (kind) {
    case BlockingKind::Wait:
      return g_interruptible_waits;
    case BlockingKind::Collective:
      return g_interruptible_collectives;
    case BlockingKind::Enqueue:
      break;
  }
  return false;
}

}  // namespace

bool runs_inline(BlockingKind kind) {
  return kind == BlockingKind::Enqueue || !offloaded(kind) || g_in_wait || !on_main_thread();
}

void run_blocking(BlockingKind kind, std::function<void()> body) {
  if (runs_inline(kind)) {
    run_inline(body);
    return;
  }
  if (!g_worker) g_worker = Worker::start();
  auto task = std::make_shared<Task>();
  task->body = std::move(body);
  g_worker->post(task);
  g_in_wait = true;
  PyThreadState* gil_state = PyEval_SaveThread();
  const bool finished = wait_for(*task, &gil_state);
  PyEval_RestoreThread(gil_state);
  g_in_wait = false;
  if (!finished) {
    abandon(*task);
    throw py::error_already_set();
  }
  if (task->error) std::rethrow_exception(task->error);
}

void set_interruptible(bool waits, bool collectives) {
  g_interruptible_waits = waits;
  g_interruptible_collectives = collectives;
}

bool interruptible_waits() { return g_interruptible_waits; }

bool interruptible_collectives() { return g_interruptible_collectives; }

void init_blocking_calls() {
  g_main_thread =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  pthread_atfork(nullptr, nullptr, &forget_worker_after_fork);
  if (const char* env = std::getenv("GROUPCOORD_PY_INTERRUPTIBLE")) {
    const std::string mode(env);
    g_interruptible_waits = mode != "0";
    g_interruptible_collectives = mode == "all";
  }
  if (const char* spin = std::getenv("GROUPCOORD_PY_SPIN_US")) {
    g_completion_spin = std::chrono::microseconds(std::atoi(spin));
  }
  if (const char* spin = std::getenv("GROUPCOORD_PY_IDLE_SPIN_US")) {
    g_idle_spin = std::chrono::microseconds(std::atoi(spin));
  }
}

int abandoned_calls_in_flight() { return g_abandoned_in_flight.load(); }

}  // namespace python
}  // namespace groupcoord
