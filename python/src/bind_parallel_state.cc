// vLLM's parallel_state module functions. The collective ones run through run_blocking (GIL
// released; Ctrl-C interrupts a rendezvous that waits for missing peers).
#include <pybind11/stl.h>

#include <string>

#include "bindings.h"
#include "blocking_call.h"
#include "groupcoord/check.h"
#include "groupcoord/default_timeout.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/world.h"
#include "py_message_queue.h"
#include "timeout_arg.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

/// vLLM's `backend: str | None`: None means "".
std::string backend_arg(py::object backend) {
  if (backend.is_none()) return "";
  return py::str(backend).cast<std::string>();
}

/// vLLM allows decode_context_model_parallel_size=None (meaning 1).
int size_arg(py::object size) { return size.is_none() ? 1 : size.cast<int>(); }

void init_distributed_environment_py(int world_size, int rank,
                                     const std::string& distributed_init_method, int local_rank,
                                     py::object backend, py::object timeout) {
  const auto bound = timeout_from_python(timeout, "init_distributed_environment");
  const std::chrono::milliseconds deadline = bound.value_or(default_timeout());
  run_blocking(BlockingKind::Wait, [=, b = backend_arg(backend)] {
    init_distributed_environment(world_size, rank, distributed_init_method, local_rank, b,
                                 deadline);
  });
}

void initialize_model_parallel_py(int tp, int pp, int pcp, py::object dcp, py::object backend,
                                  int dp) {
  run_blocking(BlockingKind::Wait, [=, d = size_arg(dcp), b = backend_arg(backend)] {
    initialize_model_parallel(tp, pp, pcp, d, dp, b);
  });
}

void ensure_model_parallel_initialized_py(int tp, int pp, int pcp, py::object dcp,
                                          py::object backend) {
  run_blocking(BlockingKind::Wait, [=, d = size_arg(dcp), b = backend_arg(backend)] {
    ensure_model_parallel_initialized(tp, pp, pcp, d, b);
  });
}

void destroy(void (*fn)()) {
  run_blocking(BlockingKind::Wait, [fn] { fn(); });
  PyGroup::prune_borrowed();
}

void bind_setup(py::module_& m) {
  m.def("init_distributed_environment", &init_distributed_environment_py, "world_size"_a = -1,
        "rank"_a = -1, "distributed_init_method"_a = "env://", "local_rank"_a = -1,
        "backend"_a = "", "timeout"_a = py::none(), R"doc(
Collective over all world ranks: rendezvous (env://, tcp://host:port, file:///path; under plain
mpirun nothing else is needed) and the world group. -1 takes the value from the launcher; backend
"" picks nccl with CUDA devices, else gloo; timeout (seconds or datetime.timedelta; None:
GROUPCOORD_TIMEOUT_S, else 300 s) bounds the rendezvous and is every group's default timeout. A
second call with the same world is a no-op.)doc");
  m.def("initialize_model_parallel", &initialize_model_parallel_py,
        "tensor_model_parallel_size"_a = 1, "pipeline_model_parallel_size"_a = 1,
        "prefill_context_model_parallel_size"_a = 1, "decode_context_model_parallel_size"_a = 1,
        "backend"_a = py::none(), "data_parallel_size"_a = 1, R"doc(
Collective over all world ranks: builds the TP, PP, DCP, PCP, DP and EP groups (vLLM's layout,
ExternalDP x DP x PP x PCP x TP). ValueError when the sizes do not divide the world or when already
initialized.)doc");
  m.def("ensure_model_parallel_initialized", &ensure_model_parallel_initialized_py,
        "tensor_model_parallel_size"_a, "pipeline_model_parallel_size"_a,
        "prefill_context_model_parallel_size"_a = 1, "decode_context_model_parallel_size"_a = 1,
        "backend"_a = py::none(),
        "initialize_model_parallel unless initialized; else checks the sizes match (ValueError).");
  m.def("model_parallel_is_initialized", &model_parallel_is_initialized,
        "True when the model-parallel groups exist.");
  m.def("is_initialized", &world_is_initialized,
        "True while the distributed world exists (torch.distributed.is_initialized()).");
  m.def(
      "destroy_model_parallel", [] { destroy(&destroy_model_parallel); },
      "Destroys the model-parallel groups (local, idempotent); their objects then raise.");
  m.def(
      "destroy_distributed_environment", [] { destroy(&destroy_distributed_environment); },
      "Destroys the model-parallel groups, the world group and the world (local, idempotent; "
      "call it after the last collective every rank takes part in).");
}

template <GroupCoordinator& (*Getter)()>
void getter(py::module_& m, const char* name, const char* doc) {
  m.def(
      name, [] { return PyGroup::borrowed(Getter()); }, doc);
}

void bind_getters(py::module_& m) {
  getter<&get_world_group>(m, "get_world_group", "The world GroupCoordinator.");
  getter<&get_tp_group>(m, "get_tp_group", "The tensor-parallel GroupCoordinator.");
  getter<&get_tp_group>(m, "get_tensor_model_parallel_group", "Alias of get_tp_group().");
  getter<&get_pp_group>(m, "get_pp_group", "The pipeline-parallel GroupCoordinator.");
  getter<&get_pp_group>(m, "get_pipeline_model_parallel_group", "Alias of get_pp_group().");
  getter<&get_dp_group>(m, "get_dp_group", "The data-parallel GroupCoordinator.");
  getter<&get_ep_group>(m, "get_ep_group", "The expert-parallel GroupCoordinator.");
  getter<&get_dcp_group>(m, "get_dcp_group", "The decode-context-parallel GroupCoordinator.");
  getter<&get_pcp_group>(m, "get_pcp_group", "The prefill-context-parallel GroupCoordinator.");
  m.def("get_tensor_model_parallel_world_size", &get_tensor_model_parallel_world_size,
        "Size of the TP group.");
  m.def("get_tensor_model_parallel_rank", &get_tensor_model_parallel_rank,
        "This rank in the TP group.");
  m.def("get_decode_context_model_parallel_world_size",
        &get_decode_context_model_parallel_world_size, "Size of the DCP group.");
  m.def("get_decode_context_model_parallel_rank", &get_decode_context_model_parallel_rank,
        "This rank in the DCP group.");
}

void bind_node_queries(py::module_& m) {
  m.def(
      "get_node_count", [] { return get_node_count(); },
      "Number of nodes the world spans (counted by init_distributed_environment).");
  m.def(
      "in_the_same_node_as",
      [](py::object pg, int source_rank) {
        auto group = process_group_arg(pg, "in_the_same_node_as");
        return call_blocking(BlockingKind::Wait, [group, source_rank] {
          return in_the_same_node_as(*group, source_rank);
        });
      },
      "pg"_a, "source_rank"_a = 0, R"doc(
Collective over ``pg`` (a ProcessGroup or GroupCoordinator): for each rank of the group, whether it
runs on the same node as group rank ``source_rank``.)doc");
}

/// A list of rank lists as a Python list of lists.
py::list rank_lists(const std::vector<std::vector<int>>& lists) {
  py::list out;
  for (const auto& ranks : lists) out.append(py::cast(ranks));
  return out;
}

RankFailurePolicy policy_arg(const std::string& name) {
  if (name == "plain") return RankFailurePolicy::kPlain;
  GC_CHECK(name == "identify", "set_rank_failure_policy: unknown policy '", name,
           "': use 'plain' (errors as they come) or 'identify' (RankFailureError naming the dead "
           "ranks)");
  return RankFailurePolicy::kIdentify;
}

void bind_elastic(py::module_& m) {
  py::class_<WorldShrink>(m, "WorldShrink", "What one shrink of the world did.")
      .def_readonly("epoch", &WorldShrink::epoch, "1 for the world's first shrink, 2 for the next")
      .def_readonly("excluded", &WorldShrink::excluded, "World ranks removed (old numbering).")
      .def_readonly("new_rank_of", &WorldShrink::new_rank_of,
                    "Old world rank -> new world rank, -1 for the excluded.");
  py::class_<ModelParallelShrink>(m, "ModelParallelShrink", "What shrink_model_parallel did.")
      .def_readonly("excluded", &ModelParallelShrink::excluded)
      .def_readonly("new_rank_of", &ModelParallelShrink::new_rank_of)
      .def_readonly("world_size", &ModelParallelShrink::world_size)
      .def_readonly("rank", &ModelParallelShrink::rank)
      .def_property_readonly(
          "layout",
          [](const ModelParallelShrink& s) {
            py::dict layout;
            layout["tp"] = rank_lists(s.layout.tp);
            layout["dcp"] = rank_lists(s.layout.dcp);
            layout["pcp"] = rank_lists(s.layout.pcp);
            layout["pp"] = rank_lists(s.layout.pp);
            layout["dp"] = rank_lists(s.layout.dp);
            layout["ep"] = rank_lists(s.layout.ep);
            return layout;
          },
          "Each kind's groups after the shrink (world ranks, new numbering), by kind name.");
  m.def(
      "shrink_model_parallel",
      [](std::vector<int> excluded_world_ranks) {
        return call_blocking(BlockingKind::Wait, [excluded_world_ranks] {
          return shrink_model_parallel(excluded_world_ranks);
        });
      },
      "excluded_world_ranks"_a, R"doc(
Collective over the surviving world ranks: removes these world ranks (numbered before the shrink)
from the world and every parallel_state group, renumbers, and returns a ModelParallelShrink
(docs/elastic.md). The getters keep returning the same group objects.)doc");
  m.def(
      "shrink_world",
      [](std::vector<int> excluded_world_ranks) {
        return call_blocking(BlockingKind::Wait,
                             [excluded_world_ranks] { return shrink_world(excluded_world_ranks); });
      },
      "excluded_world_ranks"_a,
      "Collective over the survivors: shrinks the world alone (no coordinators built).");
  m.def("find_dead_ranks", &find_dead_ranks,
        "World ranks known dead (local and quick: this node's peers through /proc, others as "
        "reported).");
  m.def(
      "set_rank_failure_policy",
      [](const std::string& policy) { set_rank_failure_policy(policy_arg(policy)); }, "policy"_a,
      "'plain' (errors as they come) or 'identify' (RankFailureError naming the dead ranks).");
  m.def(
      "get_rank_failure_policy",
      [] { return rank_failure_policy() == RankFailurePolicy::kIdentify ? "identify" : "plain"; },
      "The rank-failure policy in force.");
}

}  // namespace

void bind_parallel_state(py::module_& module) {
  bind_setup(module);
  bind_getters(module);
  bind_node_queries(module);
  bind_elastic(module);
}

}  // namespace python
}  // namespace groupcoord
