#include "tensor_ops.h"

#include <pybind11/stl.h>

#include "groupcoord/check.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

/// `value` as T; a value of the wrong type is the caller's fault (ValueError), not pybind11's
/// RuntimeError.
template <typename T>
T cast_arg(py::handle value, const char* what) {
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    GC_CHECK(false, what, " has the wrong type: ", py::repr(value).cast<std::string>());
  }
  return T();
}

}  // namespace

std::optional<std::vector<std::int64_t>> sizes_from_python(py::handle sizes) {
  if (sizes.is_none()) return std::nullopt;
  GC_CHECK(py::isinstance<py::sequence>(sizes), "sizes must be None or a list of ints, got ",
           py::repr(sizes).cast<std::string>());
  return cast_arg<std::vector<std::int64_t>>(sizes, "sizes");
}

bool uniform_sizes(py::handle sizes, int world_size, std::int64_t each) {
  if (sizes.is_none()) return true;
  PyObject* seq = sizes.ptr();
  if (!PyList_Check(seq) && !PyTuple_Check(seq)) return false;
  if (PySequence_Fast_GET_SIZE(seq) != world_size) return false;
  PyObject** items = PySequence_Fast_ITEMS(seq);
  for (int i = 0; i < world_size; ++i) {
    if (!PyLong_CheckExact(items[i])) return false;
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(items[i], &overflow);
    if (overflow != 0 || value != each) return false;  // an exact int: no error is set
  }
  return true;
}

Shape shape_from_python(py::handle size, const std::string& label) {
  // A tuple of exact ints (torch.Size is a tuple) without pybind11's sequence conversion.
  if (PyTuple_Check(size.ptr())) {
    const Py_ssize_t n = PyTuple_GET_SIZE(size.ptr());
    Shape shape(static_cast<std::size_t>(n));
    bool plain = true;
    for (Py_ssize_t i = 0; i < n && plain; ++i) {
      PyObject* item = PyTuple_GET_ITEM(size.ptr(), i);
      int overflow = 0;
      plain = PyLong_CheckExact(item) != 0;
      if (plain) shape[static_cast<std::size_t>(i)] = PyLong_AsLongLongAndOverflow(item, &overflow);
      plain = plain && overflow == 0;
    }
    if (plain) return shape;  // anything else takes the checked conversion below
  }
  if (py::isinstance<py::int_>(size)) return Shape{cast_arg<std::int64_t>(size, "recv: size")};
  GC_CHECK(py::isinstance<py::sequence>(size) && !py::isinstance<py::str>(size), label,
           ".recv: size must be an int or a sequence of ints, got ",
           py::repr(size).cast<std::string>());
  return cast_arg<Shape>(size, "recv: size");
}

std::optional<int> optional_rank(py::handle rank) {
  if (rank.is_none()) return std::nullopt;
  return cast_arg<int>(rank, "rank (src/dst)");
}

}  // namespace python
}  // namespace groupcoord
