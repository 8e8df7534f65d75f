// groupcoord.ProcessGroup: the opaque Gloo groups behind a coordinator (g.cpu_group,
// g.device_group), as torch's ProcessGroup objects are to vLLM.
#include <pybind11/stl.h>

#include "bindings.h"
#include "groupcoord/process_group.h"
#include "timeout_arg.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {

void bind_process_group(py::module_& module) {
  py::class_<ProcessGroup, std::shared_ptr<ProcessGroup>>(module, "ProcessGroup", R"doc(
A Gloo process group (the CPU group or the Gloo device group of a GroupCoordinator). Opaque:
pass it where a group is expected (MessageQueue.create_from_process_group,
in_the_same_node_as).)doc")
      .def("rank", &ProcessGroup::rank, "This process's rank in the group.")
      .def("size", &ProcessGroup::size, "Number of ranks in the group.")
      .def_property_readonly("ranks", &ProcessGroup::world_ranks,
                             "World rank of each member, in group order.")
      .def_property_readonly("name", &ProcessGroup::name, "Name used in error messages.")
      .def_property_readonly(
          "timeout", [](const ProcessGroup& pg) { return seconds(pg.timeout()); },
          "Deadline of each operation, in seconds.")
      .def("is_broken", &ProcessGroup::is_broken,
           "True after a transport error broke the group (later calls raise).")
      .def("__repr__", [](const ProcessGroup& pg) {
        return "groupcoord.ProcessGroup(name='" + pg.name() +
               "', rank=" + std::to_string(pg.rank()) + ", size=" + std::to_string(pg.size()) + ")";
      });
}

}  // namespace python
}  // namespace groupcoord
