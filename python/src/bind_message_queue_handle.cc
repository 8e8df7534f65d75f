// groupcoord.MessageQueueHandle: vLLM's shm_broadcast.Handle over MessageQueue::Handle. It is
// what an external writer (a process outside the readers' group) hands to its readers: plain
// data, picklable (through its byte form), so it travels like vLLM's Handle does.
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <sstream>
#include <string>

#include "groupcoord/check.h"
#include "py_message_queue.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

using Handle = MessageQueue::Handle;

py::bytes to_py_bytes(const Handle& h) { return py::bytes(h.to_bytes()); }

std::string repr(const Handle& h) {
  std::ostringstream out;
  out << "groupcoord.MessageQueueHandle(local_reader_ranks=[";
  for (std::size_t i = 0; i < h.reader_ranks.size(); ++i) {
    out << (i ? ", " : "") << h.reader_ranks[i];
  }
  out << "], shm_name='" << h.shm_name << "', max_chunk_bytes=" << h.max_chunk_bytes
      << ", max_chunks=" << h.max_chunks << ", writer_pid=" << h.writer_pid << ")";
  return out.str();
}

}  // namespace

std::optional<MessageQueue::Handle> handle_arg(py::handle obj, const char* what) {
  if (obj.is_none()) return std::nullopt;
  if (py::isinstance<Handle>(obj)) return obj.cast<Handle>();
  if (py::isinstance<py::bytes>(obj) || py::isinstance<py::bytearray>(obj)) {
    py::object data = py::module_::import("builtins").attr("bytes")(obj);
    return Handle::from_bytes(data.cast<std::string>());
  }
  GC_CHECK(false, what, ": expected a MessageQueueHandle (or its to_bytes()), got ",
           py::repr(obj).cast<std::string>());
  return std::nullopt;  // not reached
}

void bind_message_queue_handle(py::module_& module) {
  py::class_<Handle>(module, "MessageQueueHandle", R"doc(
vLLM's shm_broadcast.Handle: what readers need to attach to a MessageQueue, from
MessageQueue.export_handle(). Pass it (or its to_bytes()) to MessageQueue.create_from_handle(),
or as external_writer_handle to GroupCoordinator.create_mq_broadcaster() /
MessageQueue.create_from_process_group(). Picklable. Only same-node readers exist here, so the
ZeroMQ addresses of vLLM's Handle are always None.)doc")
      .def_property_readonly(
          "local_reader_ranks", [](const Handle& h) { return h.reader_ranks; },
          "Ranks the readers attach as (reader i is rank local_reader_ranks[i]).")
      .def_property_readonly(
          "buffer_handle",
          [](const Handle& h) {
            return py::make_tuple(h.reader_ranks.size(), h.max_chunk_bytes, h.max_chunks,
                                  h.shm_name);
          },
          "vLLM's (n_reader, max_chunk_bytes, max_chunks, shared-memory name).")
      .def_property_readonly(
          "shm_name", [](const Handle& h) { return h.shm_name; }, "The segment's POSIX name.")
      .def_property_readonly(
          "max_chunk_bytes", [](const Handle& h) { return h.max_chunk_bytes; }, "Chunk size.")
      .def_property_readonly(
          "max_chunks", [](const Handle& h) { return h.max_chunks; }, "Chunks in the ring.")
      .def_property_readonly(
          "writer_pid", [](const Handle& h) { return h.writer_pid; },
          "Process id of the writer (for messages).")
      .def_property_readonly(
          "local_subscribe_addr", [](const Handle&) { return py::none(); },
          "Always None (no ZeroMQ socket: large messages stream through the ring).")
      .def_property_readonly(
          "remote_subscribe_addr", [](const Handle&) { return py::none(); },
          "Always None (remote readers are not supported).")
      .def("to_bytes", &to_py_bytes, "The handle as bytes (a fixed little-endian layout).")
      .def_static(
          "from_bytes", [](py::bytes data) { return Handle::from_bytes(data.cast<std::string>()); },
          "data"_a,
          "Parses to_bytes()'s output; ValueError on anything else.")
      .def(py::self == py::self)  // NOLINT(misc-redundant-expression)
      .def("__hash__", [](const Handle& h) { return py::hash(to_py_bytes(h)); })
      .def("__repr__", &repr)
      .def(py::pickle([](const Handle& h) { return py::make_tuple(to_py_bytes(h)); },
                      [](const py::tuple& state) {
                        GC_CHECK(state.size() == 1, "MessageQueueHandle: bad pickle state");
                        return Handle::from_bytes(state[0].cast<std::string>());
                      }));
}

}  // namespace python
}  // namespace groupcoord
