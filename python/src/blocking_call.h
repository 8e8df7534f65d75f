// Running C++ calls that may block (collectives, receives, store waits) from Python: without the
// GIL, and — on the main thread — interruptibly, so that Ctrl-C raises KeyboardInterrupt.
//
// Why a helper thread: Python runs signal handlers only on the main thread, between bytecodes. A
// main thread blocked inside a C++ wait never gets there, and groupcoord's waits (Gloo, the TCP
// store) retry on EINTR, so a signal cannot cut them short. So on the main thread the call runs on
// a helper thread while the main thread waits, spinning briefly and then sleeping in short slices
// between which it runs PyErr_CheckSignals(). When a handler raises (KeyboardInterrupt), the call
// is *abandoned*: the exception propagates at once, and the C++ operation keeps running on its
// helper thread until it finishes or hits its deadline. The group it was using is then in an
// undefined state (as after a timeout); destroy it or exit.
//
// The handoff costs two thread wake-ups per call (tens of microseconds on a busy machine), so it
// is only paid where a long wait is expected:
//   Wait        waits by nature: rendezvous, group creation, recv, objects, tensor dicts,
//               barrier, Handle.wait, message queues. Interruptible by default.
//   Collective  the hot data path: all_reduce, all_gather, ..., send on host tensors. Inline by
//               default (a stuck collective still ends at the group's deadline);
//               set_interruptible(True, collectives=True) makes them interruptible too.
//   Enqueue     device work that is only enqueued (CUDA): always inline.
// Other threads (no signal handlers run there) always call inline with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "groupcoord/wait_interrupt.h"

namespace groupcoord {
namespace python {

/// Whether a call can wait for a peer for long.
enum class BlockingKind {
  Wait,        ///< receives, objects, store waits, ...: interruptible on the main thread
  Collective,  ///< host tensor collectives: interruptible only when asked for
  Enqueue,     ///< device work that is only enqueued: always inline (no handoff cost)
};

/// Runs `body` with the GIL released (see the file comment). The caller holds the GIL. `body` must
/// own everything it uses (capture by value): an abandoned body outlives the caller's frame.
/// C++ exceptions from `body` propagate; a Python exception raised by a signal handler while
/// waiting propagates as pybind11::error_already_set.
void run_blocking(BlockingKind kind, std::function<void()> body);

/// Whether a call of `kind` made now runs on the calling thread (Enqueue calls always do; the
/// others unless they are interruptible here). The caller holds the GIL.
bool runs_inline(BlockingKind kind);

/// run_blocking for a body that returns a value. A call that runs inline calls `fn` directly
/// (no std::function, no shared result slot: nothing is allocated per call).
template <typename Fn>
auto call_blocking(BlockingKind kind, Fn fn) -> decltype(fn()) {
  using Result = decltype(fn());
  if (runs_inline(kind)) {
    pybind11::gil_scoped_release release;
    return fn();
  }
  if constexpr (std::is_void_v<Result>) {
    run_blocking(kind, std::move(fn));
  } else {
    // Shared, not on this frame: an abandoned body still writes its result somewhere valid.
    auto slot = std::make_shared<std::optional<Result>>();
    run_blocking(kind, [fn = std::move(fn), slot]() mutable { slot->emplace(fn()); });
    return std::move(**slot);
  }
}

/// For calls whose every wait is on shared memory (the message queue, a coordinator's
/// broadcast_object through its queue): runs `fn` on this thread with the GIL released. Where
/// waits are interruptible (the main thread, by default) the shared-memory waits run the signal
/// handlers themselves before each of their sleeps (groupcoord/wait_interrupt.h) instead of the
/// call moving to a helper thread: after an engine's pause between steps that handoff cost two
/// more thread wake-ups per message (measured: Python's p50 60-300 µs at 1-20 ms pauses against
/// 10-50 µs from C++, docs/benchmarks/paced_waits.md).
template <typename Fn>
auto call_waiting_in_shared_memory(Fn fn) -> decltype(fn()) {
  if (runs_inline(BlockingKind::Wait)) {
    pybind11::gil_scoped_release release;
    return fn();
  }
  ScopedWaitInterrupt signals([] {
    pybind11::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  });
  pybind11::gil_scoped_release release;
  return fn();
}

/// Which kinds run on the helper thread when called from the main thread: Wait calls when
/// `waits`, Collective calls when `collectives`. Default: waits only; the environment variable
/// GROUPCOORD_PY_INTERRUPTIBLE sets the default ("0": none, "1": waits, "all": both).
void set_interruptible(bool waits, bool collectives);
/// Current setting for Wait calls.
bool interruptible_waits();
/// Current setting for Collective calls.
bool interruptible_collectives();

/// Records the Python main thread (call once at import, with the GIL held).
void init_blocking_calls();

/// Number of abandoned calls still running on helper threads.
int abandoned_calls_in_flight();

}  // namespace python
}  // namespace groupcoord
