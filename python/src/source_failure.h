// A source that cannot produce what it would send (its pickling raised, its tensor dict could not
// be read) tells the ranks waiting for it before its own exception propagates, so that they raise
// at once instead of at their deadline (GroupCoordinator::*_failed, MessageQueue::enqueue_error).
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <functional>
#include <string>
#include <utility>

namespace groupcoord {
namespace python {

/// Runs `tell(why)` as a waiting call (without the GIL, interruptible); a failure to tell is
/// logged, as the caller is about to raise the error that matters.
void tell_waiting_ranks(const std::function<void(const std::string&)>& tell,
                        const std::string& why);

/// "<ExceptionType>: <message>" of the Python exception being handled.
std::string python_error_text(const pybind11::error_already_set& error);

/// Runs `produce` (the source's pickling or import) and returns its result; when it throws,
/// tells the waiting ranks why through `tell` and rethrows.
template <typename Produce>
auto produce_or_tell(Produce&& produce, const std::function<void(const std::string&)>& tell)
    -> decltype(produce()) {
  try {
    return std::forward<Produce>(produce)();
  } catch (const pybind11::error_already_set& error) {
    tell_waiting_ranks(tell, python_error_text(error));
    throw;
  } catch (const std::exception& error) {
    tell_waiting_ranks(tell, error.what());
    throw;
  }
}

}  // namespace python
}  // namespace groupcoord
