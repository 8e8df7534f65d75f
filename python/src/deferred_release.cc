#include "deferred_release.h"

#include <atomic>
#include <mutex>
#include <vector>

namespace groupcoord {
namespace python {
namespace {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

/// Released without the GIL and not yet dropped. Leaked: releases may come after static
/// destruction has begun.
struct Queue {
  std::mutex mutex;
  std::vector<PyObject*> objects;
  std::vector<Py_buffer*> views;
  bool drop_scheduled = false;  ///< a Py_AddPendingCall for the queue is pending
  std::atomic<bool> non_empty{false};
};

Queue& queue() {
  static Queue* instance = new Queue();
  return *instance;
}

int drop_pending(void*) {
  drop_released();
  return 0;
}

/// Whether a release may touch Python now: the interpreter is up and this thread holds the GIL.
/// Sets *leak when the interpreter is gone or finalising.
bool can_release_now(bool* leak) {
  *leak = !Py_IsInitialized() || interpreter_finalizing();
  return !*leak && PyGILState_Check() != 0;
}

/// Queues with `push` (under the queue's lock) and schedules the drop once.
template <typename Push>
void enqueue(Push push) {
  Queue& q = queue();
  bool schedule = false;
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    push(q);
    q.non_empty.store(true, std::memory_order_release);
    schedule = !q.drop_scheduled;
    q.drop_scheduled = true;
  }
  // Fails only when the interpreter's queue of pending calls is full: the next drop_released()
  // made with the GIL takes them then.
  if (schedule && Py_AddPendingCall(&drop_pending, nullptr) != 0) {
    std::lock_guard<std::mutex> lock(q.mutex);
    q.drop_scheduled = false;
  }
}

}  // namespace

void release_reference(PyObject* object) {
  bool leak = false;
  if (can_release_now(&leak)) {
    Py_DECREF(object);
  } else if (!leak) {
    enqueue([object](Queue& q) { q.objects.push_back(object); });
  }
}

void release_buffer(Py_buffer* view) {
  bool leak = false;
  if (can_release_now(&leak)) {
    PyBuffer_Release(view);
    delete view;
  } else if (!leak) {
    enqueue([view](Queue& q) { q.views.push_back(view); });
  } else {
    delete view;  // the exporter is gone with the interpreter; the struct is ours
  }
}

void drop_released() {
  Queue& q = queue();
  if (!q.non_empty.load(std::memory_order_acquire)) return;
  std::vector<PyObject*> objects;
  std::vector<Py_buffer*> views;
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    objects.swap(q.objects);
    views.swap(q.views);
    q.drop_scheduled = false;
    q.non_empty.store(false, std::memory_order_relaxed);
  }
  for (PyObject* object : objects) Py_DECREF(object);
  for (Py_buffer* view : views) {
    PyBuffer_Release(view);
    delete view;
  }
}

}  // namespace python
}  // namespace groupcoord
