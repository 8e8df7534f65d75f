#include <pybind11/stl.h>

#include <string>

#include "bindings.h"
#include "blocking_call.h"
#include "groupcoord/check.h"
#include "groupcoord/default_timeout.h"
#include "pickle_codec.h"
#include "py_message_queue.h"
#include "source_failure.h"
#include "timeout_arg.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

using QueuePtr = std::shared_ptr<MessageQueue>;

void enqueue(const QueuePtr& q, py::object obj, py::object timeout) {
  const auto bound = timeout_from_python(timeout, "MessageQueue.enqueue");
  // A writer whose object cannot be pickled tells its readers (enqueue_error) before raising.
  Bytes data = produce_or_tell([&] { return dumps(obj); },
                               [q, bound](const std::string& why) {
                                 if (q->is_writer()) q->enqueue_error(why, bound);
                               });
  call_waiting_in_shared_memory([&q, &data, bound] { q->enqueue(data, bound); });
}

void enqueue_error(const QueuePtr& q, const std::string& why, py::object timeout) {
  const auto bound = timeout_from_python(timeout, "MessageQueue.enqueue_error");
  call_waiting_in_shared_memory([&q, &why, bound] { q->enqueue_error(why, bound); });
}

py::object dequeue(const QueuePtr& q, py::object timeout, bool indefinite) {
  const auto bound = timeout_from_python(timeout, "MessageQueue.dequeue");
  Bytes data = call_waiting_in_shared_memory(
      [&q, bound, indefinite] { return q->dequeue(bound, indefinite); });
  return loads(data);
}

/// vLLM: the writer enqueues and returns obj, a reader returns the next message.
py::object broadcast_object(const QueuePtr& q, py::object obj) {
  if (q->is_writer()) {
    enqueue(q, obj, py::none());
    return py::reinterpret_borrow<py::object>(obj);
  }
  return dequeue(q, py::none(), false);
}

void wait_until_ready(const QueuePtr& q, py::object timeout) {
  const auto bound = timeout_from_python(timeout, "MessageQueue.wait_until_ready");
  call_waiting_in_shared_memory([&q, bound] { q->wait_until_ready(bound); });
}

py::object create(py::object pg, std::size_t max_chunk_bytes, std::size_t max_chunks,
                  int writer_rank, py::object external_writer_handle, bool blocking) {
  const char* what = "MessageQueue.create_from_process_group";
  auto group = process_group_arg(pg, what);
  return py::cast(create_collective(group, max_chunk_bytes, max_chunks, writer_rank,
                                    external_writer_handle, blocking, what));
}

/// vLLM's MessageQueue(n_reader, n_local_reader, local_reader_ranks, max_chunk_bytes,
/// max_chunks, connect_ip): a writer outside any group.
QueuePtr construct(std::size_t n_reader, std::size_t n_local_reader,
                   std::optional<std::vector<int>> local_reader_ranks, std::size_t max_chunk_bytes,
                   std::size_t max_chunks, py::object connect_ip, py::object timeout) {
  const char* what = "MessageQueue";
  GC_CHECK(n_local_reader == n_reader, what, ": n_reader ", n_reader, " != n_local_reader ",
           n_local_reader, ": readers on other nodes are not supported");
  (void)connect_ip;  // vLLM binds its remote readers' socket there; there are none here
  const auto bound = timeout_from_python(timeout, what).value_or(default_timeout());
  return QueuePtr(MessageQueue::create(n_reader, max_chunk_bytes, max_chunks,
                                       local_reader_ranks.value_or(std::vector<int>{}), bound));
}

QueuePtr create_from_handle(py::object handle, int rank, py::object timeout) {
  const char* what = "MessageQueue.create_from_handle";
  auto parsed = handle_arg(handle, what);
  GC_CHECK(parsed.has_value(), what, ": handle is None");
  const auto bound = timeout_from_python(timeout, what).value_or(default_timeout());
  return QueuePtr(MessageQueue::create_from_handle(*parsed, rank, bound));
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

std::shared_ptr<MessageQueue> create_collective(std::shared_ptr<ProcessGroup> group,
                                                std::size_t max_chunk_bytes, std::size_t max_chunks,
                                                int writer_rank, py::handle external_writer_handle,
                                                bool blocking, const std::string& what) {
  // Only the writer rank's handle counts (vLLM ignores the others'), so only it is parsed. A
  // parse failure must not make that rank alone skip the collective: it takes part with an
  // empty (invalid) handle, which makes every rank raise ValueError, and reports its own
  // parse error instead.
  std::optional<MessageQueue::Handle> handle;
  std::string parse_error;
  if (group->rank() == writer_rank && !external_writer_handle.is_none()) {
    try {
      handle = handle_arg(external_writer_handle, what.c_str());
    } catch (const std::invalid_argument& error) {
      parse_error = error.what();
      handle = MessageQueue::Handle{};
    }
  }
  try {
    return call_blocking(BlockingKind::Wait, [=] {
      return std::shared_ptr<MessageQueue>(MessageQueue::create_from_process_group(
          group, max_chunk_bytes, max_chunks, writer_rank, handle, blocking));
    });
  } catch (const std::invalid_argument&) {
    if (!parse_error.empty()) throw std::invalid_argument(parse_error);
    throw;
  }
}

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
  bind_message_queue_handle(module);
  py::class_<MessageQueue, QueuePtr>(module, "MessageQueue", R"doc(
vLLM's shared-memory broadcaster (shm_broadcast.MessageQueue): one writer, same-node readers, a
ring of chunks in POSIX shared memory; objects travel pickled. Create it collectively with
GroupCoordinator.create_mq_broadcaster() or MessageQueue.create_from_process_group(), or as a
writer outside any group with MessageQueue(n_reader, n_local_reader, ...) whose readers attach
with MessageQueue.create_from_handle(writer.export_handle(), rank). Unlike vLLM, every wait has
a deadline (None: the queue's default timeout), messages larger than a chunk are split across
chunks (no ZeroMQ socket), and remote readers are not supported.)doc")
      .def(py::init(&construct), "n_reader"_a, "n_local_reader"_a,
           "local_reader_ranks"_a = py::none(), "max_chunk_bytes"_a = std::size_t{1} << 22,
           "max_chunks"_a = 6, "connect_ip"_a = py::none(), py::kw_only(), "timeout"_a = py::none(),
           R"doc(
vLLM's constructor: a writer that belongs to no group (e.g. an engine's scheduler process), for
``n_reader`` readers on this node; hand ``export_handle()`` to them. ``n_local_reader`` must equal
``n_reader`` (no remote readers); ``local_reader_ranks`` (default 0 .. n_reader-1) are the ranks
the readers attach as; ``connect_ip`` is accepted and ignored. The ring's memory (here 6 chunks of
4 MiB by default, the sizes GroupCoordinator uses; vLLM's defaults are larger) is reserved up
front. ``timeout`` (seconds, keyword only) is the default timeout; None: GROUPCOORD_TIMEOUT_S,
else 300 s.)doc")
      .def("export_handle", &MessageQueue::export_handle, R"doc(
vLLM's export_handle(): the MessageQueueHandle of a queue made by MessageQueue(...) (or the one a
reader was attached from). ValueError for queues made collectively.)doc")
      .def_static("create_from_handle", &create_from_handle, "handle"_a, "rank"_a, py::kw_only(),
                  "timeout"_a = py::none(), R"doc(
vLLM's create_from_handle(handle, rank): attaches this process as the reader ``rank`` of
``handle.local_reader_ranks`` (a MessageQueueHandle or its to_bytes()). Not collective. ValueError
when the handle does not list ``rank``; DistributedError when the writer's segment is gone.
``timeout`` (seconds, keyword only): the default timeout; None: GROUPCOORD_TIMEOUT_S, else
300 s.)doc")
      .def_static("create_from_process_group", &create, "pg"_a, "max_chunk_bytes"_a, "max_chunks"_a,
                  "writer_rank"_a = 0, "external_writer_handle"_a = py::none(), "blocking"_a = true,
                  R"doc(
Collective over every rank of ``pg`` (a ProcessGroup or a GroupCoordinator): group rank
``writer_rank`` writes, every other rank reads. ``blocking`` waits until every reader is ready.
With ``external_writer_handle`` (a MessageQueueHandle or its bytes; only group rank
``writer_rank``'s value counts, as in vLLM) the writer is that external queue: every rank of the
group, writer_rank included, attaches as the reader of its group rank (each must be in the
handle's local_reader_ranks); then ``blocking`` needs the writer's wait_until_ready() too.)doc")
      .def_static("create_from_process_group_single_reader", &create_single_reader, "pg"_a,
                  "max_chunk_bytes"_a, "max_chunks"_a, "reader_rank"_a = 0, "blocking"_a = false,
                  R"doc(
Collective: every rank except group rank ``reader_rank`` writes its own one-reader queue. Returns
a list: on a writer its queue, on the reader one queue per writer (in group-rank order). vLLM
returns (queue, handles) instead; here the reader gets attached queues directly.)doc")
      .def("enqueue", &enqueue, "obj"_a, "timeout"_a = py::none(),
           "Writer: appends pickle(obj); waits while the ring is full (timeout in seconds). When "
           "obj cannot be pickled, the readers are told (as by enqueue_error) before the error "
           "is raised.")
      .def("enqueue_error", &enqueue_error, "why"_a, "timeout"_a = py::none(),
           "Writer, beyond vLLM's API: sent instead of an object it cannot produce. Each "
           "reader's next dequeue raises SourceFailedError carrying ``why``; the queue stays "
           "usable.")
      .def("dequeue", &dequeue, "timeout"_a = py::none(), "indefinite"_a = false,
           "Reader: the next object (timeout in seconds; DistributedTimeoutError when it runs "
           "out, nothing is lost). indefinite=True: no long-wait log lines while waiting (the "
           "deadline still holds).")
      .def("shutdown", &MessageQueue::shutdown,
           "vLLM's shutdown(), from any thread: this process's waiting enqueue/dequeue/"
           "wait_until_ready calls, and every later call, raise DistributedError (a RuntimeError) "
           "with 'cancelled' in the message. The peers are not told.")
      .def_property_readonly("is_shut_down", &MessageQueue::is_shut_down,
                             "True once shutdown() was called.")
      .def_property(
          "warning_interval",
          [](const MessageQueue& q) {
            return std::chrono::duration<double>(q.warning_interval()).count();
          },
          [](MessageQueue& q, double seconds) {
            q.set_warning_interval(
                std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000)));
          },
          "Seconds between the long-wait log lines (GROUPCOORD_RINGBUFFER_WARNING_INTERVAL, "
          "default 60); ValueError unless positive.")
      .def("broadcast_object", &broadcast_object, "obj"_a = py::none(),
           "Writer: enqueues obj and returns it; reader: returns dequeue().")
      .def("wait_until_ready", &wait_until_ready, "timeout"_a = py::none(),
           "Readiness handshake between the writer and every reader.")
      .def_property_readonly("is_writer", &MessageQueue::is_writer, "True on the writer.")
      .def_property_readonly("is_reader", &MessageQueue::is_reader, "True on a reader.")
      .def_property_readonly("n_reader", &MessageQueue::num_readers, "Number of readers.")
      .def_property_readonly("n_local_reader", &MessageQueue::num_local_readers,
                             "Readers on the writer's node (shared memory); the others are "
                             "served over TCP.")
      .def_property_readonly("local_reader_rank", &MessageQueue::reader_index,
                             "This reader's index among the readers; -1 on the writer.")
      .def_property_readonly("writer_rank", &MessageQueue::writer_rank,
                             "Group rank of the writer; -1 when the writer belongs to no group.")
      .def_property_readonly("reader_ranks", &MessageQueue::reader_ranks,
                             "Ranks of the readers (group ranks, or the handle's ranks).")
      .def_property_readonly("shm_name", &MessageQueue::shm_name,
                             "The segment's POSIX name ('' without readers).")
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
