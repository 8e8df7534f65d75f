// Objects travel as pickles (Bytes): pickle.dumps with the highest protocol, pickle.loads.
#pragma once

#include <pybind11/pybind11.h>

#include "groupcoord/bytes.h"

namespace groupcoord {
namespace python {

/// pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) as Bytes.
Bytes dumps(pybind11::handle obj);
/// pickle.loads of `data` (read through a memoryview: no extra copy).
pybind11::object loads(const Bytes& data);

}  // namespace python
}  // namespace groupcoord
