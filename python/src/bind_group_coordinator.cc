// groupcoord.GroupCoordinator: construction, vLLM's rank properties, lifetime and factories.
// The tensor calls are in bind_group_tensor_ops.cc, objects and tensor dicts in
// bind_group_object_ops.cc.
#include <pybind11/stl.h>

#include <sstream>
#include <string>

#include "bindings.h"
#include "blocking_call.h"
#include "groupcoord/check.h"
#include "py_communicator.h"
#include "py_message_queue.h"
#include "timeout_arg.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

/// vLLM's constructor; collective over all world ranks.
GroupPtr construct(std::vector<std::vector<int>> group_ranks, int local_rank, std::string backend,
                   bool use_device_communicator, bool use_message_queue_broadcaster,
                   std::optional<std::string> group_name, bool use_all2all, py::object timeout) {
  const auto bound = timeout_from_python(timeout, "GroupCoordinator");
  auto owned = call_blocking(BlockingKind::Wait, [=] {
    return std::make_unique<GroupCoordinator>(
        group_ranks, local_rank, backend, use_device_communicator, use_message_queue_broadcaster,
        group_name, use_all2all, bound);
  });
  return std::make_shared<PyGroup>(std::move(owned));
}

std::string repr(const GroupPtr& g) {
  const GroupCoordinator& c = g->get();
  std::ostringstream out;
  out << "groupcoord.GroupCoordinator(unique_name='" << c.unique_name()
      << "', rank_in_group=" << c.rank_in_group() << ", world_size=" << c.world_size()
      << ", ranks=[";
  for (std::size_t i = 0; i < c.ranks().size(); ++i) out << (i ? ", " : "") << c.ranks()[i];
  out << "])";
  return out.str();
}

py::object device_communicator(const GroupPtr& g) {
  if (g->get().device_communicator() == nullptr) return py::none();
  return py::cast(std::make_shared<PyCommunicator>(g));
}

void bind_constructor(GroupClass& cls) {
  const char* doc = R"doc(
Collective over ALL world ranks (like torch.distributed.new_group): creates one CPU (Gloo) group
and one device group per entry of ``group_ranks`` (lists of world ranks) and keeps the one
containing this rank. ``torch_distributed_backend`` is "gloo" or "nccl" ("" picks nccl when CUDA
devices are present). ``timeout`` (seconds or datetime.timedelta, keyword only; an addition to
vLLM's arguments) bounds every operation of the new groups; None: the world's timeout. The
coordinator is destroyed with this object (or by destroy()).)doc";
  cls.def(py::init(&construct), "group_ranks"_a, "local_rank"_a, "torch_distributed_backend"_a,
          "use_device_communicator"_a, "use_message_queue_broadcaster"_a = false,
          "group_name"_a = py::none(), "use_all2all"_a = false, py::kw_only(),
          "timeout"_a = py::none(), doc);
  // The public API names the third argument `backend`: accepted as a keyword too.
  cls.def(py::init(&construct), "group_ranks"_a, "local_rank"_a, "backend"_a,
          "use_device_communicator"_a, "use_message_queue_broadcaster"_a = false,
          "group_name"_a = py::none(), "use_all2all"_a = false, py::kw_only(),
          "timeout"_a = py::none(), "As above, with the backend passed as ``backend=``.");
}

template <typename Fn>
void property(GroupClass& cls, const char* name, Fn fn, const char* doc) {
  cls.def_property_readonly(
      name, [fn](const GroupPtr& g) { return fn(g->get()); }, doc);
}

void bind_rank_properties(GroupClass& cls) {
  using C = const GroupCoordinator&;
  property(
      cls, "rank", [](C c) { return c.rank(); }, "World rank of this process.");
  property(
      cls, "ranks", [](C c) { return c.ranks(); }, "World ranks of the group.");
  property(
      cls, "world_size", [](C c) { return c.world_size(); }, "Size of the group.");
  property(
      cls, "local_rank", [](C c) { return c.local_rank(); },
      "Rank used to pick the device (the rank on this node).");
  property(
      cls, "device_index", [](C c) { return c.local_rank(); },
      "vLLM's device_index: the local rank.");
  property(
      cls, "rank_in_group", [](C c) { return c.rank_in_group(); }, "Rank inside the group.");
  // Readable even after parallel_state destroyed the group (for messages and logs).
  cls.def_property_readonly(
      "unique_name", [](const GroupPtr& g) { return g->unique_name(); }, "E.g. 'tp:0'.");
  property(
      cls, "first_rank", [](C c) { return c.first_rank(); },
      "World rank of the group's first member.");
  property(
      cls, "last_rank", [](C c) { return c.last_rank(); },
      "World rank of the group's last member.");
  property(
      cls, "is_first_rank", [](C c) { return c.is_first_rank(); },
      "Whether this process is the group's first member.");
  property(
      cls, "is_last_rank", [](C c) { return c.is_last_rank(); },
      "Whether this process is the group's last member.");
  property(
      cls, "next_rank", [](C c) { return c.next_rank(); },
      "World rank of the following member (wraps around).");
  property(
      cls, "prev_rank", [](C c) { return c.prev_rank(); },
      "World rank of the preceding member (wraps around).");
  property(
      cls, "group_ranks", [](C c) { return c.group_ranks(); },
      "Every group created with this one (lists of world ranks).");
  property(
      cls, "torch_distributed_backend", [](C c) { return c.backend(); },
      "'gloo' or 'nccl' (vLLM's attribute name).");
  property(
      cls, "backend", [](C c) { return c.backend(); }, "'gloo' or 'nccl'.");
  property(
      cls, "device", [](C c) { return c.device().str(); }, "'cpu' or 'cuda:N'.");
}

void bind_groups(GroupClass& cls) {
  property(
      cls, "cpu_group", [](const GroupCoordinator& c) { return c.cpu_group(); },
      "The Gloo group for CPU communication (a ProcessGroup).");
  property(
      cls, "device_group", [](const GroupCoordinator& c) { return c.device_group(); },
      "The Gloo device group (gloo backend), else None (NCCL lives in the communicator).");
  cls.def_property_readonly("device_communicator", &device_communicator,
                            "The DeviceCommunicator, or None (world size 1, or created without "
                            "use_device_communicator).");
  // A shared reference to the coordinator's queue: valid after destroy() too (the queue then
  // lives on with this object, as a Python reference to vLLM's would).
  property(
      cls, "mq_broadcaster", [](const GroupCoordinator& c) { return c.mq_broadcaster(); },
      "vLLM's mq_broadcaster: the MessageQueue that broadcast_object from group rank 0 uses "
      "(use_message_queue_broadcaster and world size > 1, readers on one node), else None.");
}

void bind_lifetime(GroupClass& cls) {
  cls.def(
         "barrier",
         [](const GroupPtr& g) {
           g->get();
           run_blocking(BlockingKind::Wait, [g] { g->get().barrier(); });
         },
         "Barrier on the CPU group (collective over the group).")
      .def(
          "shrink",
          [](const GroupPtr& g, std::vector<int> excluded_world_ranks) {
            g->get();
            run_blocking(BlockingKind::Wait,
                         [g, excluded_world_ranks] { g->get().shrink(excluded_world_ranks); });
          },
          "excluded_world_ranks"_a,
          "Collective over the surviving world ranks: removes these world ranks (numbered before "
          "the shrink) from the world and this group, in place, and renumbers (docs/elastic.md).")
      .def(
          "destroy",
          [](const GroupPtr& g) {
            g->get();
            run_blocking(BlockingKind::Wait, [g] { g->get().destroy(); });
          },
          "Releases the communicator, then the groups (idempotent, local). Later collective calls "
          "raise DistributedError.")
      .def("__repr__", &repr);
}

void bind_factories(GroupClass& cls) {
  cls.def(
         "make_sibling_device_group",
         [](const GroupPtr& g, std::optional<std::string> group_desc) {
           g->get();
           auto comm = call_blocking(BlockingKind::Wait, [g, group_desc] {
             return g->get().make_sibling_device_group(group_desc);
           });
           return std::make_shared<PyCommunicator>(std::move(comm), *g);
         },
         "group_desc"_a = py::none(), R"doc(
Collective over ALL world ranks: a new DeviceCommunicator with this group's membership but its own
connections, for calls that run concurrently with this group's. (vLLM returns a torch
ProcessGroup.))doc")
      .def(
          "create_mq_broadcaster",
          [](const GroupPtr& g, int writer_rank, py::object external_writer_handle, bool blocking) {
            return create_collective(g->get().cpu_group(), std::size_t{1} << 22, 6, writer_rank,
                                     external_writer_handle, blocking,
                                     g->label() + ".create_mq_broadcaster");
          },
          "writer_rank"_a = 0, "external_writer_handle"_a = py::none(), "blocking"_a = true,
          R"doc(
Collective over the group: a MessageQueue (4 MiB chunks, 6 of them) written by group rank
``writer_rank`` and read by every other rank. With ``external_writer_handle`` (the
MessageQueueHandle of a queue made by MessageQueue(...) in another process, or its bytes; only
group rank ``writer_rank``'s value counts, as in vLLM) nobody in the group writes: every rank,
writer_rank included, attaches as a reader of that queue (see
MessageQueue.create_from_process_group); pass blocking=False unless the writer calls
wait_until_ready() meanwhile.)doc")
      .def(
          "create_single_reader_mq_broadcasters",
          [](const GroupPtr& g, int reader_rank_in_group, bool blocking) {
            auto pg = g->get().cpu_group();
            auto queues = call_blocking(BlockingKind::Wait, [pg, reader_rank_in_group, blocking] {
              std::vector<std::shared_ptr<MessageQueue>> out;
              for (auto& q : MessageQueue::create_from_process_group_single_reader(
                       pg, std::size_t{1} << 22, 6, reader_rank_in_group, blocking)) {
                out.emplace_back(std::move(q));
              }
              return out;
            });
            return queues;
          },
          "reader_rank_in_group"_a = 0, "blocking"_a = false, R"doc(
Collective over the group: every rank except ``reader_rank_in_group`` writes a one-reader queue.
Returns a list of MessageQueue: a writer's own queue, or the reader's queues (one per
writer).)doc");
}

}  // namespace

GroupClass bind_group_coordinator(py::module_& module) {
  GroupClass cls(module, "GroupCoordinator", R"doc(
vLLM's GroupCoordinator without PyTorch: a group of processes with a CPU (Gloo) group, a device
group and a DeviceCommunicator. Same methods, argument names and defaults as vLLM; rank arguments
(src, dst) are ranks *in the group*; tensors are any arrays with __dlpack__ (numpy, torch, cupy)
and come back as the caller's type; objects travel pickled. Objects from get_tp_group() etc.
belong to parallel_state and raise DistributedError once it destroyed them.)doc");
  bind_constructor(cls);
  bind_rank_properties(cls);
  bind_groups(cls);
  bind_lifetime(cls);
  bind_factories(cls);
  return cls;
}

}  // namespace python
}  // namespace groupcoord
