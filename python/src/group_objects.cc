#include "group_objects.h"

#include <string>
#include <vector>

#include "blocking_call.h"
#include "groupcoord/check.h"
#include "pickle_codec.h"
#include "py_work.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {

py::object broadcast_object(const std::shared_ptr<PyGroup>& g, py::object obj, int src) {
  GroupCoordinator& c = g->get();
  if (c.world_size() == 1) return py::reinterpret_borrow<py::object>(obj);
  const bool is_src = c.rank_in_group() == src;
  std::optional<Bytes> data;
  if (is_src) data = dumps(obj);
  auto call = [g, data = std::move(data), src] { return g->get().broadcast_object(data, src); };
  // Through the coordinator's queue every wait is on shared memory (no helper thread needed).
  Bytes out = src == 0 && c.has_mq_broadcaster()
                  ? call_waiting_in_shared_memory(std::move(call))
                  : call_blocking(BlockingKind::Wait, std::move(call));
  if (is_src) return py::reinterpret_borrow<py::object>(obj);
  return loads(out);
}

py::object broadcast_object_list(const std::shared_ptr<PyGroup>& g, py::object obj_list, int src) {
  GroupCoordinator& c = g->get();
  if (c.world_size() == 1) return py::reinterpret_borrow<py::object>(obj_list);
  GC_CHECK(py::isinstance<py::list>(obj_list), g->label(),
           ".broadcast_object_list: obj_list must be a list, got ",
           py::repr(obj_list).cast<std::string>());
  py::list items = py::reinterpret_borrow<py::list>(obj_list);
  const bool is_src = c.rank_in_group() == src;
  std::vector<Bytes> data(items.size());
  if (is_src) {
    for (std::size_t i = 0; i < items.size(); ++i) data[i] = dumps(items[i]);
  }
  std::vector<Bytes> out = call_blocking(BlockingKind::Wait, [g, data = std::move(data), src] {
    return g->get().broadcast_object_list(data, src);
  });
  if (!is_src) {
    for (std::size_t i = 0; i < items.size() && i < out.size(); ++i) items[i] = loads(out[i]);
  }
  return items;
}

void send_object(const std::shared_ptr<PyGroup>& g, py::object obj, int dst) {
  g->get();
  run_blocking(BlockingKind::Wait,
               [g, data = dumps(obj), dst] { g->get().send_object(data, dst); });
}

py::object recv_object(const std::shared_ptr<PyGroup>& g, int src) {
  g->get();
  Bytes data = call_blocking(BlockingKind::Wait, [g, src] { return g->get().recv_object(src); });
  return loads(data);
}

py::object isend_object(const std::shared_ptr<PyGroup>& g, py::object obj, int dst) {
  g->get();
  std::shared_ptr<Work> work = call_blocking(BlockingKind::Collective, [g, data = dumps(obj), dst] {
    return g->get().isend_object(data, dst);
  });
  return py::cast(PyWork{std::move(work)});
}

}  // namespace python
}  // namespace groupcoord
