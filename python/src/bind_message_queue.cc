#include <pybind11/stl.h>

#include <string>

#include "bindings.h"
#include "blocking_call.h"
#include "groupcoord/check.h"
#include "pickle_codec.h"
#include "py_message_queue.h"
#include "timeout_arg.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

using QueuePtr = std::shared_ptr<MessageQueue>;

void enqueue(const QueuePtr& q, py::object obj, py::object timeout) {
  const auto bound = timeout_from_python(timeout, "MessageQueue.enqueue");
  run_blocking(BlockingKind::Wait, [q, data = dumps(obj), bound] { q->enqueue(data, bound); });
}

py::object dequeue(const QueuePtr& q, py::object timeout) {
  const auto bound = timeout_from_python(timeout, "MessageQueue.dequeue");
  Bytes data = call_blocking(BlockingKind::Wait, [q, bound] { return q->dequeue(bound); });
  return loads(data);
}

/// vLLM: the writer enqueues and returns obj, a reader returns the next message.
py::object broadcast_object(const QueuePtr& q, py::object obj) {
  if (q->is_writer()) {
    enqueue(q, obj, py::none());
    return py::reinterpret_borrow<py::object>(obj);
  }
  return dequeue(q, py::none());
}

void wait_until_ready(const QueuePtr& q, py::object timeout) {
  const auto bound = timeout_from_python(timeout, "MessageQueue.wait_until_ready");
  run_blocking(BlockingKind::Wait, [q, bound] { q->wait_until_ready(bound); });
}

py::object create(py::object pg, std::size_t max_chunk_bytes, std::size_t max_chunks,
                  int writer_rank, py::object external_writer_handle, bool blocking) {
  GC_CHECK(external_writer_handle.is_none(),
           "MessageQueue.create_from_process_group: external_writer_handle is not supported "
           "(readers must be on the writer's node)");
  auto group = process_group_arg(pg, "MessageQueue.create_from_process_group");
  auto queue = call_blocking(BlockingKind::Wait, [=] {
    return std::shared_ptr<MessageQueue>(MessageQueue::create_from_process_group(
        group, max_chunk_bytes, max_chunks, writer_rank, blocking));
  });
  return py::cast(queue);
}

py::list create_single_reader(py::object pg, std::size_t max_chunk_bytes, std::size_t max_chunks,
                              int reader_rank, bool blocking) {
  auto group = process_group_arg(pg, "MessageQueue.create_from_process_group_single_reader");
  auto queues = call_blocking(BlockingKind::Wait, [=] {
    std::vector<QueuePtr> out;
    for (auto& q : MessageQueue::create_from_process_group_single_reader(
             group, max_chunk_bytes, max_chunks, reader_rank, blocking)) {
      out.emplace_back(std::move(q));
    }
    return out;
  });
  py::list out;
  for (auto& q : queues) out.append(py::cast(q));
  return out;
}

}  // namespace

std::shared_ptr<ProcessGroup> process_group_arg(py::handle group, const char* what) {
  if (py::isinstance<PyGroup>(group))
    return group.cast<std::shared_ptr<PyGroup>>()->get().cpu_group();
  GC_CHECK(py::isinstance<ProcessGroup>(group), what,
           ": expected a ProcessGroup or a GroupCoordinator, got ",
           py::repr(group).cast<std::string>());
  return group.cast<std::shared_ptr<ProcessGroup>>();
}

py::object wrap_queue(std::unique_ptr<MessageQueue> queue) {
  return py::cast(QueuePtr(std::move(queue)));
}

py::list wrap_queues(std::vector<std::unique_ptr<MessageQueue>> queues) {
  py::list out;
  for (auto& q : queues) out.append(wrap_queue(std::move(q)));
  return out;
}

void bind_message_queue(py::module_& module) {
  py::class_<MessageQueue, QueuePtr>(module, "MessageQueue", R"doc(
vLLM's shared-memory broadcaster (shm_broadcast.MessageQueue): one writer, same-node readers, a
ring of chunks in POSIX shared memory; objects travel pickled. Create it collectively with
GroupCoordinator.create_mq_broadcaster() or MessageQueue.create_from_process_group(). Unlike vLLM,
every wait has a deadline (None: the queue's default timeout), messages larger than a chunk are
split across chunks (no ZeroMQ socket), and remote readers are not supported.)doc")
      .def_static("create_from_process_group", &create, "pg"_a, "max_chunk_bytes"_a, "max_chunks"_a,
                  "writer_rank"_a = 0, "external_writer_handle"_a = py::none(), "blocking"_a = true,
                  R"doc(
Collective over every rank of ``pg`` (a ProcessGroup or a GroupCoordinator): group rank
``writer_rank`` writes, every other rank reads. ``blocking`` waits until every reader is
ready.)doc")
      .def_static("create_from_process_group_single_reader", &create_single_reader, "pg"_a,
                  "max_chunk_bytes"_a, "max_chunks"_a, "reader_rank"_a = 0, "blocking"_a = false,
                  R"doc(
Collective: every rank except group rank ``reader_rank`` writes its own one-reader queue. Returns
a list: on a writer its queue, on the reader one queue per writer (in group-rank order). vLLM
returns (queue, handles) instead; here the reader gets attached queues directly.)doc")
      .def("enqueue", &enqueue, "obj"_a, "timeout"_a = py::none(),
           "Writer: appends pickle(obj); waits while the ring is full (timeout in seconds).")
      .def("dequeue", &dequeue, "timeout"_a = py::none(),
           "Reader: the next object (timeout in seconds; DistributedTimeoutError when it runs "
           "out, nothing is lost).")
      .def("broadcast_object", &broadcast_object, "obj"_a = py::none(),
           "Writer: enqueues obj and returns it; reader: returns dequeue().")
      .def("wait_until_ready", &wait_until_ready, "timeout"_a = py::none(),
           "Readiness handshake between the writer and every reader.")
      .def_property_readonly("is_writer", &MessageQueue::is_writer, "True on the writer.")
      .def_property_readonly("is_reader", &MessageQueue::is_reader, "True on a reader.")
      .def_property_readonly("n_reader", &MessageQueue::num_readers, "Number of readers.")
      .def_property_readonly("n_local_reader", &MessageQueue::num_readers,
                             "Number of same-node readers (all of them).")
      .def_property_readonly("local_reader_rank", &MessageQueue::reader_index,
                             "This reader's index among the readers; -1 on the writer.")
      .def_property_readonly("writer_rank", &MessageQueue::writer_rank, "Group rank of the writer.")
      .def_property_readonly("reader_ranks", &MessageQueue::reader_ranks,
                             "Group ranks of the readers.")
      .def_property_readonly("max_chunk_bytes", &MessageQueue::max_chunk_bytes,
                             "Chunk size in bytes (16-byte header included).")
      .def_property_readonly("max_chunks", &MessageQueue::max_chunks, "Chunks in the ring.")
      .def_property_readonly("name", &MessageQueue::name, "Name used in errors.")
      .def_property(
          "default_timeout", [](const MessageQueue& q) { return seconds(q.default_timeout()); },
          [](MessageQueue& q, py::object timeout) {
            auto bound = timeout_from_python(timeout, "MessageQueue.default_timeout");
            GC_CHECK(bound.has_value(), "MessageQueue.default_timeout cannot be None");
            q.set_default_timeout(*bound);
          },
          "Timeout (seconds) of calls that pass timeout=None.");
}

}  // namespace python
}  // namespace groupcoord
