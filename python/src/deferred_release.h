// Dropping Python references from threads that may not hold the GIL, without waiting for it.
//
// The memory of a groupcoord tensor can be a Python object's (a numpy buffer, a torch CPU tensor
// viewed in place, a torch/cupy block from framework_allocator.h), and the tensor's last reference
// can die on any thread: a helper thread finishing an abandoned call, a watchdog, a thread that
// holds a lock of the library. Waiting there for the GIL (PyGILState_Ensure) deadlocks when a
// thread holding the GIL waits for that lock, and at interpreter exit the interpreter stops such a
// thread in the middle of its deleter. So a release with the GIL drops the reference at once; one
// without queues it and asks the interpreter to drop the queue (Py_AddPendingCall: the main
// thread runs it between bytecodes); any later call with the GIL that finds the queue non-empty
// drops it too. Once the interpreter is finalising, references are leaked on purpose: what they
// would free may already be gone.
#pragma once

#include <Python.h>

namespace groupcoord {
namespace python {

/// Drops one reference to `object` (see the file comment). Any thread, GIL or not.
void release_reference(PyObject* object);

/// PyBuffer_Release(view), then deletes `view` (allocated with new). Any thread, GIL or not.
void release_buffer(Py_buffer* view);

/// Drops what was queued by releases without the GIL. Needs the GIL; cheap when nothing is queued.
void drop_released();

}  // namespace python
}  // namespace groupcoord
