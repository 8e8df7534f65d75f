// A source that cannot produce what it would send (its pickling raised, its tensor dict could not
// be read) tells the ranks waiting for it before its own exception propagates, so that they raise
// SourceFailedError at once instead of waiting for their deadline (GroupCoordinator::*_failed,
// MessageQueue::enqueue_error).
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <functional>
#include <string>
#include <utility>

namespace groupcoord {
namespace python {

/// What tells the waiting ranks. It may run on a helper thread and outlive the caller's frame
/// (an interrupted wait is abandoned, blocking_call.h): it must own what it uses (shared_ptrs
/// and values, no references).
using TellWaitingRanks = std::function<void(const std::string& why)>;

/// Runs `tell(why)` as a waiting call (without the GIL, interruptible). A failure to tell is
/// logged, as the caller is about to raise the error that matters; KeyboardInterrupt (any
/// exception that is not an Exception) propagates instead.
void tell_waiting_ranks(TellWaitingRanks tell, std::string why);

/// "<ExceptionType>: <message>" of a Python exception.
std::string python_error_text(const pybind11::error_already_set& error);

/// Runs `produce` (the source's pickling or import) and returns its result; when it throws,
/// tells the waiting ranks why through `tell` and rethrows.
template <typename Produce>
auto produce_or_tell(Produce&& produce, TellWaitingRanks tell) -> decltype(produce()) {
  try {
    return std::forward<Produce>(produce)();
  } catch (const pybind11::error_already_set& error) {
    tell_waiting_ranks(std::move(tell), python_error_text(error));
    throw;
  } catch (const std::exception& error) {
    tell_waiting_ranks(std::move(tell), error.what());
    throw;
  }
}

}  // namespace python
}  // namespace groupcoord
