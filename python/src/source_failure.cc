#include "source_failure.h"

#include "blocking_call.h"
#include "groupcoord/logging.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {

void tell_waiting_ranks(TellWaitingRanks tell, std::string why) {
  try {
    // The body owns its copies: an interrupted wait leaves it running after this frame.
    run_blocking(BlockingKind::Wait, [tell = std::move(tell), why = std::move(why)] { tell(why); });
  } catch (py::error_already_set& error) {
    if (!error.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit
    GC_LOG(Warn, "could not tell the waiting ranks of the failure (", error.what(), ")");
  } catch (const std::exception& error) {
    GC_LOG(Warn, "could not tell the waiting ranks of the failure (", error.what(), ")");
  }
}

std::string python_error_text(const py::error_already_set& error) {
  try {
    const std::string type = py::str(error.type().attr("__name__")).cast<std::string>();
    return type + ": " + py::str(error.value()).cast<std::string>();
  } catch (const py::error_already_set&) {
    return error.what();  // an exception whose str() raises: pybind11's own text
  }
}

}  // namespace python
}  // namespace groupcoord
