#include "timeout_arg.h"

#include <cmath>
#include <string>

#include "groupcoord/check.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {

std::optional<std::chrono::milliseconds> timeout_from_python(py::handle timeout, const char* what) {
  if (timeout.is_none()) return std::nullopt;
  double secs = 0;
  if (py::hasattr(timeout, "total_seconds")) {  // datetime.timedelta
    secs = timeout.attr("total_seconds")().cast<double>();
  } else if (py::isinstance<py::int_>(timeout) || py::isinstance<py::float_>(timeout)) {
    GC_CHECK(!py::isinstance<py::bool_>(timeout), what, ": timeout must be seconds, got a bool");
    secs = timeout.cast<double>();
  } else {
    GC_CHECK(false, what, ": timeout must be None, seconds or a datetime.timedelta, got ",
             py::repr(timeout).cast<std::string>());
  }
  GC_CHECK(std::isfinite(secs) && secs >= 0, what, ": timeout must be finite and >= 0, got ", secs,
           " s");
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(secs * 1000.0)));
}

double seconds(std::chrono::milliseconds timeout) {
  return static_cast<double>(timeout.count()) / 1000.0;
}

}  // namespace python
}  // namespace groupcoord
