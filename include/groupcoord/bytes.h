// Opaque byte strings: store values and serialized objects (Python pickles travel as Bytes).
#pragma once

#include <string>

namespace groupcoord {

/// A binary-safe byte string. std::string so that C++ and pybind11 (bytes) map without copies
/// of code; it may hold NUL bytes.
using Bytes = std::string;

}  // namespace groupcoord
