// Python timeout arguments (None, seconds, datetime.timedelta) to std::chrono.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <optional>

namespace groupcoord {
namespace python {

/// None -> std::nullopt; an int/float number of seconds or a datetime.timedelta -> milliseconds
/// (rounded up, so that a tiny positive timeout does not become "never wait"). Throws
/// std::invalid_argument (ValueError) naming `what` for a negative value or another type.
std::optional<std::chrono::milliseconds> timeout_from_python(pybind11::handle timeout,
                                                             const char* what);

/// Seconds as a float, for properties.
double seconds(std::chrono::milliseconds timeout);

}  // namespace python
}  // namespace groupcoord
