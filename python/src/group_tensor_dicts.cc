#include "group_tensor_dicts.h"

#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "blocking_call.h"
#include "groupcoord/check.h"
#include "py_work.h"
#include "stream_arg.h"
#include "tensor_dict_convert.h"
#include "tensor_ops.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

/// all_gather_group= as a coordinator (null for None), with its owner kept alive.
struct GroupArg {
  std::shared_ptr<PyGroup> keep;
  GroupCoordinator* group = nullptr;
};

GroupArg group_arg(py::handle obj, const std::string& what) {
  if (obj.is_none()) return {};
  GC_CHECK(py::isinstance<PyGroup>(obj), what,
           ": all_gather_group must be a GroupCoordinator or None, got ",
           py::repr(obj).cast<std::string>());
  auto group = obj.cast<std::shared_ptr<PyGroup>>();
  GroupCoordinator* raw = &group->get();
  return {std::move(group), raw};
}

std::optional<AllGatherTensors> all_gather_tensors_arg(py::handle obj, const std::string& what) {
  if (obj.is_none()) return std::nullopt;
  GC_CHECK(py::isinstance<py::dict>(obj), what,
           ": all_gather_tensors must be a dict[str, bool] or None, got ",
           py::repr(obj).cast<std::string>());
  AllGatherTensors out;
  for (auto item : py::reinterpret_borrow<py::dict>(obj)) {
    const int use = PyObject_IsTrue(item.second.ptr());
    if (use < 0) throw py::error_already_set();
    out.emplace_back(py::str(item.first).cast<std::string>(), use != 0);
  }
  return out;
}

/// The stream for received CUDA tensors (the group's device).
StreamHandle receive_stream(GroupCoordinator& c, py::handle stream, const ArrayLibrary* library) {
  const Device device = c.device();
  return resolve_stream(stream, &library_or_default(library, device), device);
}

/// irecv_tensor_dict's dictionary while its receives and reassemblies run: after each
/// postprocess step, keys whose tensor the step replaced are exported again.
struct IrecvState {
  std::shared_ptr<TensorDict> dict;
  py::dict py_dict;
  std::map<std::string, std::pair<const void*, Shape>> exported;
  const ArrayLibrary* library;
  StreamHandle stream;

  void export_all() {
    for (const auto& [key, value] : *dict) {
      py_dict[py::str(key)] = value_to_python(value, library, stream);
      remember(key, value);
    }
  }

  void sync() {
    for (const auto& [key, value] : *dict) {
      const Tensor* tensor = std::get_if<Tensor>(&value);
      if (tensor == nullptr) continue;
      auto it = exported.find(key);
      if (it != exported.end() && it->second.first == tensor->data_ptr() &&
          it->second.second == tensor->shape()) {
        continue;
      }
      py_dict[py::str(key)] = value_to_python(value, library, stream);
      remember(key, value);
    }
  }

  void remember(const std::string& key, const TensorDictValue& value) {
    if (const Tensor* tensor = std::get_if<Tensor>(&value)) {
      exported[key] = {tensor->data_ptr(), tensor->shape()};
    }
  }
};

}  // namespace

py::object broadcast_tensor_dict(const std::shared_ptr<PyGroup>& g, py::handle tensor_dict, int src,
                                 py::handle stream, py::handle array_library) {
  GroupCoordinator& c = g->get();
  if (c.world_size() == 1) return py::reinterpret_borrow<py::object>(tensor_dict);
  const ArrayLibrary* library = optional_library(array_library);
  if (c.rank_in_group() == src) {
    ImportedTensorDict in = tensor_dict_from_python(
        tensor_dict, {g->label(), "broadcast_tensor_dict", "tensor_dict"}, stream);
    run_blocking(BlockingKind::Wait, [g, in, src] {
      with_stream(in.device, in.stream, [&] { g->get().broadcast_tensor_dict(in.dict, src); });
    });
    return py::reinterpret_borrow<py::object>(tensor_dict);
  }
  const StreamHandle s = receive_stream(c, stream, library);
  std::optional<TensorDict> out = call_blocking(BlockingKind::Wait, [g, src, s] {
    return with_stream(g->get().device(), s,
                       [&] { return g->get().broadcast_tensor_dict(std::nullopt, src); });
  });
  if (!out) return py::none();
  return tensor_dict_to_python(*out, library, s);
}

py::list isend_tensor_dict(const std::shared_ptr<PyGroup>& g, py::handle tensor_dict,
                           const TensorDictOptions& options) {
  GroupCoordinator& c = g->get();
  if (c.world_size() <= 1) return py::list();
  const std::string what = g->label() + ".isend_tensor_dict";
  ImportedTensorDict in = tensor_dict_from_python(
      tensor_dict, {g->label(), "isend_tensor_dict", "tensor_dict"}, options.stream);
  GroupArg ag = group_arg(options.all_gather_group, what);
  auto works = call_blocking(
      BlockingKind::Collective, [g, in, ag, dst = optional_rank(options.peer),
                                 agt = all_gather_tensors_arg(options.all_gather_tensors, what)] {
        return with_stream(in.device, in.stream,
                           [&] { return g->get().isend_tensor_dict(in.dict, dst, ag.group, agt); });
      });
  return handle_list(works);
}

py::object send_tensor_dict(const std::shared_ptr<PyGroup>& g, py::handle tensor_dict,
                            const TensorDictOptions& options) {
  GroupCoordinator& c = g->get();
  if (c.world_size() == 1) return py::reinterpret_borrow<py::object>(tensor_dict);
  const std::string what = g->label() + ".send_tensor_dict";
  ImportedTensorDict in = tensor_dict_from_python(
      tensor_dict, {g->label(), "send_tensor_dict", "tensor_dict"}, options.stream);
  GroupArg ag = group_arg(options.all_gather_group, what);
  run_blocking(BlockingKind::Wait,
               [g, in, ag, dst = optional_rank(options.peer),
                agt = all_gather_tensors_arg(options.all_gather_tensors, what)] {
                 with_stream(in.device, in.stream,
                             [&] { g->get().send_tensor_dict(in.dict, dst, ag.group, agt); });
               });
  return py::none();
}

py::object recv_tensor_dict(const std::shared_ptr<PyGroup>& g, const TensorDictOptions& options) {
  GroupCoordinator& c = g->get();
  if (c.world_size() == 1) return py::none();
  const std::string what = g->label() + ".recv_tensor_dict";
  const ArrayLibrary* library = optional_library(options.array_library);
  const StreamHandle s = receive_stream(c, options.stream, library);
  GroupArg ag = group_arg(options.all_gather_group, what);
  std::optional<TensorDict> out = call_blocking(
      BlockingKind::Wait, [g, ag, s, src = optional_rank(options.peer),
                           agt = all_gather_tensors_arg(options.all_gather_tensors, what)] {
        return with_stream(g->get().device(), s,
                           [&] { return g->get().recv_tensor_dict(src, ag.group, agt); });
      });
  if (!out) return py::none();
  return tensor_dict_to_python(*out, library, s);
}

py::tuple irecv_tensor_dict(const std::shared_ptr<PyGroup>& g, const TensorDictOptions& options) {
  GroupCoordinator& c = g->get();
  if (c.world_size() == 1) return py::make_tuple(py::none(), py::list(), py::list());
  const std::string what = g->label() + ".irecv_tensor_dict";
  const ArrayLibrary* library = optional_library(options.array_library);
  const StreamHandle s = receive_stream(c, options.stream, library);
  GroupArg ag = group_arg(options.all_gather_group, what);
  IrecvTensorDictResult result = call_blocking(
      BlockingKind::Wait, [g, ag, s, src = optional_rank(options.peer),
                           agt = all_gather_tensors_arg(options.all_gather_tensors, what)] {
        return with_stream(g->get().device(), s,
                           [&] { return g->get().irecv_tensor_dict(src, ag.group, agt); });
      });
  if (!result.tensor_dict) return py::make_tuple(py::none(), py::list(), py::list());
  auto state =
      std::make_shared<IrecvState>(IrecvState{result.tensor_dict, py::dict(), {}, library, s});
  state->export_all();
  py::list postprocess;
  for (auto& step : result.postprocess) {
    postprocess.append(py::cpp_function([state, step, g, ag, s] {
      run_blocking(BlockingKind::Wait,
                   [step, g, ag, s] { with_stream(g->get().device(), s, [&] { step(); }); });
      state->sync();
    }));
  }
  return py::make_tuple(state->py_dict, handle_list(result.handles), postprocess);
}

}  // namespace python
}  // namespace groupcoord
