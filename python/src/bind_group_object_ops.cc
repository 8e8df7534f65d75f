// GroupCoordinator's object and tensor-dictionary calls, and their bindings (argument names and
// defaults as vLLM; `group` / `metadata_group` are accepted and ignored, as vLLM ignores them).
// Objects travel as their pickle (pickle.HIGHEST_PROTOCOL); tensor dictionaries as Python dicts
// in and out, arrays without copies, other values pickled. World size 1 bypasses as vLLM does.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "array_import.h"
#include "bindings.h"
#include "blocking_call.h"
#include "groupcoord/check.h"
#include "groupcoord/tensor_dict.h"
#include "pickle_codec.h"
#include "py_group.h"
#include "py_tensor.h"
#include "py_work.h"
#include "source_failure.h"
#include "stream_arg.h"
#include "tensor_ops.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {

/// A Python dict as a TensorDict, with the stream of its first CUDA tensor (if any).
struct ImportedTensorDict {
  TensorDict dict;
  StreamHandle stream;
  Device device = Device::cpu();  ///< of the first CUDA tensor, else CPU
};

/// Keys must be str; throws std::invalid_argument (ValueError) naming ctx otherwise, or when
/// `dict` is not a dict.
ImportedTensorDict tensor_dict_from_python(pybind11::handle dict, const ArgContext& ctx,
                                           pybind11::handle stream);

/// One value back to Python: a Tensor exported with `library` (null: its device's default), or
/// unpickled Bytes.
pybind11::object value_to_python(const TensorDictValue& value, const ArrayLibrary* library,
                                 StreamHandle stream);

/// A TensorDict as a new Python dict (see value_to_python).
pybind11::dict tensor_dict_to_python(const TensorDict& dict, const ArrayLibrary* library,
                                     StreamHandle stream);

// -------------------------------------------------------------------------------------------------

ImportedTensorDict tensor_dict_from_python(py::handle dict, const ArgContext& ctx,
                                           py::handle stream) {
  if (!py::isinstance<py::dict>(dict)) {
    throw std::invalid_argument(
        ctx.owner + "." + ctx.op + ": expecting a dictionary, got " +
        py::str(py::type::handle_of(dict).attr("__name__")).cast<std::string>());
  }
  ImportedTensorDict out;
  bool have_stream = false;
  for (auto item : py::reinterpret_borrow<py::dict>(dict)) {
    if (!py::isinstance<py::str>(item.first)) {
      throw std::invalid_argument(ctx.owner + "." + ctx.op + ": keys must be str, got " +
                                  py::repr(item.first).cast<std::string>());
    }
    std::string key = item.first.cast<std::string>();
    if (!is_array(item.second)) {
      out.dict.emplace_back(std::move(key), dumps(item.second));
      continue;
    }
    ImportedArray in = import_array(item.second, ctx, Access::Read, stream);
    if (in.tensor.device().is_cuda() && !have_stream) {
      have_stream = true;
      out.stream = in.stream;
      out.device = in.tensor.device();
    }
    out.dict.emplace_back(std::move(key), std::move(in.tensor));
  }
  return out;
}

py::object value_to_python(const TensorDictValue& value, const ArrayLibrary* library,
                           StreamHandle stream) {
  if (const Bytes* bytes = std::get_if<Bytes>(&value)) return loads(*bytes);
  const Tensor& tensor = std::get<Tensor>(value);
  return export_tensor(tensor, library_or_default(library, tensor.device()), stream);
}

py::dict tensor_dict_to_python(const TensorDict& dict, const ArrayLibrary* library,
                               StreamHandle stream) {
  py::dict out;
  for (const auto& [key, value] : dict) out[py::str(key)] = value_to_python(value, library, stream);
  return out;
}

// -------------------------------------------------------------------------------------------------
// GroupCoordinator's object calls: any picklable object travels as its pickle
// (pickle.HIGHEST_PROTOCOL). World size 1 bypasses as vLLM does (the object itself comes back).

/// `obj` on `src`, the received object elsewhere.
pybind11::object broadcast_object(const std::shared_ptr<PyGroup>& g, pybind11::object obj, int src);
/// Fills `obj_list` in place on the non-src ranks; returns it.
pybind11::object broadcast_object_list(const std::shared_ptr<PyGroup>& g, pybind11::object obj_list,
                                       int src);
void send_object(const std::shared_ptr<PyGroup>& g, pybind11::object obj, int dst);
pybind11::object recv_object(const std::shared_ptr<PyGroup>& g, int src);
/// A groupcoord.Handle.
pybind11::object isend_object(const std::shared_ptr<PyGroup>& g, pybind11::object obj, int dst);

// -------------------------------------------------------------------------------------------------

py::object broadcast_object(const std::shared_ptr<PyGroup>& g, py::object obj, int src) {
  GroupCoordinator& c = g->get();
  if (c.world_size() == 1) return py::reinterpret_borrow<py::object>(obj);
  const bool is_src = c.rank_in_group() == src;
  std::optional<Bytes> data;
  if (is_src) {
    data = produce_or_tell(
        [&] { return dumps(obj); },
        [g, src](const std::string& why) { g->get().broadcast_object_failed(why, src); });
  }
  // The source's bytes go in as an rvalue: they come back as its (unused) result without a copy.
  auto call = [g, data = std::move(data), src]() mutable {
    return data ? g->get().broadcast_object(std::move(*data), src)
                : g->get().broadcast_object(std::nullopt, src);
  };
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
  auto check_list = [&] {
    GC_CHECK(py::isinstance<py::list>(obj_list), g->label(),
             ".broadcast_object_list: obj_list must be a list, got ",
             py::repr(obj_list).cast<std::string>());
  };
  const bool is_src = c.rank_in_group() == src;
  std::vector<Bytes> data;
  if (is_src) {
    produce_or_tell(
        [&] {
          check_list();
          for (py::handle item : py::reinterpret_borrow<py::list>(obj_list)) {
            data.push_back(dumps(item));
          }
        },
        [g, src](const std::string& why) { g->get().broadcast_object_list_failed(why, src); });
  } else {
    check_list();
  }
  py::list items = py::reinterpret_borrow<py::list>(obj_list);
  data.resize(items.size());
  std::vector<Bytes> out = call_blocking(BlockingKind::Wait, [g, data = std::move(data), src] {
    return g->get().broadcast_object_list(data, src);
  });
  if (!is_src) {
    for (std::size_t i = 0; i < items.size() && i < out.size(); ++i) items[i] = loads(out[i]);
  }
  return items;
}

namespace {

/// A sender's pickle of `obj`; when pickling raises, group rank `dst` is told (an explicit dst,
/// checked as send_object checks it).
Bytes pickle_for(const std::shared_ptr<PyGroup>& g, py::handle obj, int dst) {
  return produce_or_tell(
      [&] { return dumps(obj); },
      [g, dst](const std::string& why) { g->get().send_object_failed(why, dst); });
}

}  // namespace

void send_object(const std::shared_ptr<PyGroup>& g, py::object obj, int dst) {
  g->get();  // a destroyed group raises before anything is pickled
  run_blocking(BlockingKind::Wait,
               [g, data = pickle_for(g, obj, dst), dst] { g->get().send_object(data, dst); });
}

py::object recv_object(const std::shared_ptr<PyGroup>& g, int src) {
  g->get();
  Bytes data = call_blocking(BlockingKind::Wait, [g, src] { return g->get().recv_object(src); });
  return loads(data);
}

py::object isend_object(const std::shared_ptr<PyGroup>& g, py::object obj, int dst) {
  g->get();  // a destroyed group raises before anything is pickled
  std::shared_ptr<Work> work = call_blocking(
      BlockingKind::Collective,
      [g, data = pickle_for(g, obj, dst), dst] { return g->get().isend_object(data, dst); });
  return py::cast(PyWork{std::move(work)});
}

// -------------------------------------------------------------------------------------------------
// GroupCoordinator's tensor-dictionary calls (vLLM's *_tensor_dict): Python dicts in and out,
// arrays without copies, other values pickled. World size 1 bypasses as vLLM does.

/// The options every point-to-point tensor-dict call shares.
struct TensorDictOptions {
  pybind11::handle peer;                ///< dst or src (None: next / previous rank)
  pybind11::handle all_gather_group;    ///< a GroupCoordinator or None
  pybind11::handle all_gather_tensors;  ///< dict[str, bool] or None
  pybind11::handle stream;
  pybind11::handle array_library;  ///< receivers only
};

pybind11::object broadcast_tensor_dict(const std::shared_ptr<PyGroup>& g,
                                       pybind11::handle tensor_dict, int src,
                                       pybind11::handle stream, pybind11::handle array_library);
pybind11::object send_tensor_dict(const std::shared_ptr<PyGroup>& g, pybind11::handle tensor_dict,
                                  const TensorDictOptions& options);
pybind11::list isend_tensor_dict(const std::shared_ptr<PyGroup>& g, pybind11::handle tensor_dict,
                                 const TensorDictOptions& options);
pybind11::object recv_tensor_dict(const std::shared_ptr<PyGroup>& g,
                                  const TensorDictOptions& options);
/// (dict, handles, postprocess): the dict's arrays fill as the handles complete; each
/// postprocess callable runs one all_gather reassembly and updates the dict.
pybind11::tuple irecv_tensor_dict(const std::shared_ptr<PyGroup>& g,
                                  const TensorDictOptions& options);

// -------------------------------------------------------------------------------------------------

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

/// What a point-to-point tensor-dict send needs, read from Python.
struct SendingTensorDict {
  ImportedTensorDict in;
  GroupArg ag;
  std::optional<AllGatherTensors> agt;
  std::optional<int> dst;
};

/// The `stream=` check that makes a receiver raise (receive_stream below: on a CUDA group, a
/// stream that is not None must be a handle of a known kind), made by a source before it reads
/// its dict. A stream every rank gets wrong then raises everywhere and nobody is told: a report
/// the receivers never read would be taken by their next receive. The price: a stream wrong on
/// the source alone leaves its receivers waiting until the group's timeout (the source cannot
/// tell the two cases apart; docs/reliability.md).
void check_stream_as_receivers_do(const GroupCoordinator& c, py::handle stream) {
  if (!stream.is_none() && c.device().is_cuda()) (void)stream_handle(stream);
}

/// Reads a sender's arguments for `op`; when they cannot be read, the receiver (dst=, else the
/// next rank) is told before the error propagates.
SendingTensorDict read_sending(const std::shared_ptr<PyGroup>& g, py::handle tensor_dict,
                               const char* op, const TensorDictOptions& options) {
  // The arguments a receiver reads too are checked first: when they are wrong, every rank
  // raises the same error and nobody is told (the group stays in step). Only the dict itself is
  // the sender's alone.
  const std::string what = g->label() + "." + op;
  SendingTensorDict send{{},
                         group_arg(options.all_gather_group, what),
                         all_gather_tensors_arg(options.all_gather_tensors, what),
                         optional_rank(options.peer)};
  check_stream_as_receivers_do(g->get(), options.stream);
  send.in = produce_or_tell(
      [&] {
        return tensor_dict_from_python(tensor_dict, {g->label(), op, "tensor_dict"},
                                       options.stream);
      },
      [g, dst = send.dst](const std::string& why) { g->get().send_object_failed(why, dst); });
  return send;
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
    check_stream_as_receivers_do(c, stream);
    ImportedTensorDict in = produce_or_tell(
        [&] {
          return tensor_dict_from_python(
              tensor_dict, {g->label(), "broadcast_tensor_dict", "tensor_dict"}, stream);
        },
        [g, src](const std::string& why) { g->get().broadcast_object_failed(why, src); });
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
  SendingTensorDict send = read_sending(g, tensor_dict, "isend_tensor_dict", options);
  auto works = call_blocking(BlockingKind::Collective, [g, send] {
    return with_stream(send.in.device, send.in.stream, [&] {
      return g->get().isend_tensor_dict(send.in.dict, send.dst, send.ag.group, send.agt);
    });
  });
  return handle_list(works);
}

py::object send_tensor_dict(const std::shared_ptr<PyGroup>& g, py::handle tensor_dict,
                            const TensorDictOptions& options) {
  GroupCoordinator& c = g->get();
  if (c.world_size() == 1) return py::reinterpret_borrow<py::object>(tensor_dict);
  SendingTensorDict send = read_sending(g, tensor_dict, "send_tensor_dict", options);
  run_blocking(BlockingKind::Wait, [g, send] {
    with_stream(send.in.device, send.in.stream, [&] {
      g->get().send_tensor_dict(send.in.dict, send.dst, send.ag.group, send.agt);
    });
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

// -------------------------------------------------------------------------------------------------
// GroupCoordinator's object and tensor-dictionary calls (argument names and defaults as vLLM;
// `group` / `metadata_group` are accepted and ignored, as vLLM ignores them).

namespace {

void bind_objects(GroupClass& cls) {
  cls.def("broadcast_object", &broadcast_object, "obj"_a = py::none(), "src"_a = 0,
          "Collective: ``obj`` from group rank src (returned as is there), unpickled elsewhere.")
      .def(
          "broadcast_object_list",
          [](const GroupPtr& g, py::object obj_list, int src, py::object /*group*/) {
            return broadcast_object_list(g, obj_list, src);
          },
          "obj_list"_a, "src"_a = 0, "group"_a = py::none(),
          "Collective: fills ``obj_list`` in place with src's objects and returns it.")
      .def("send_object", &send_object, "obj"_a, "dst"_a,
           "Sends a picklable object to group rank dst.")
      .def("recv_object", &recv_object, "src"_a, "Receives an object from group rank src.")
      .def("isend_object", &isend_object, "obj"_a, "dst"_a,
           "Non-blocking send_object; returns a Handle (keeps the pickle alive).")
      .def(
          "broadcast_object_failed",
          [](const GroupPtr& g, const std::string& why, int src) {
            run_blocking(BlockingKind::Wait,
                         [g, why, src] { g->get().broadcast_object_failed(why, src); });
          },
          "why"_a, "src"_a = 0, R"doc(
Beyond vLLM's API: what the source calls instead of broadcast_object (or broadcast_tensor_dict)
when it cannot produce the object. The other ranks' call raises DistributedError carrying
``why`` at once; the group stays in step. broadcast_object does this itself when pickling
raises.)doc")
      .def(
          "broadcast_object_list_failed",
          [](const GroupPtr& g, const std::string& why, int src) {
            run_blocking(BlockingKind::Wait,
                         [g, why, src] { g->get().broadcast_object_list_failed(why, src); });
          },
          "why"_a, "src"_a = 0, "broadcast_object_failed for broadcast_object_list.")
      .def(
          "send_object_failed",
          [](const GroupPtr& g, const std::string& why, py::object dst) {
            g->get().send_object_failed(why, optional_rank(dst));
          },
          "why"_a, "dst"_a = py::none(), R"doc(
broadcast_object_failed for recv_object and recv_tensor_dict on group rank ``dst`` (default:
the next rank). Does not wait for the receiver.)doc");
}

void bind_tensor_dicts(GroupClass& cls) {
  cls.def(
         "broadcast_tensor_dict",
         [](const GroupPtr& g, py::object tensor_dict, int src, py::object, py::object,
            py::object stream, py::object library) {
           return broadcast_tensor_dict(g, tensor_dict, src, stream, library);
         },
         "tensor_dict"_a = py::none(), "src"_a = 0, "group"_a = py::none(),
         "metadata_group"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
         "array_library"_a = py::none(), R"doc(
Collective: src's dict (str keys; arrays travel as arrays, other values pickled). Returns
``tensor_dict`` itself on src and at world size 1, a new dict elsewhere (arrays of
``array_library`` or the device default).)doc")
      .def(
          "send_tensor_dict",
          [](const GroupPtr& g, py::object d, py::object dst, py::object ag, py::object agt,
             py::object stream) {
            return send_tensor_dict(g, d, {dst, ag, agt, stream, py::none()});
          },
          "tensor_dict"_a, "dst"_a = py::none(), "all_gather_group"_a = py::none(),
          "all_gather_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(), R"doc(
Sends a dict to group rank dst (None: the next rank). With ``all_gather_group`` each of its ranks
sends a slice of every tensor whose size divides (``all_gather_tensors`` overrides per key) and the
receiver reassembles it with an all_gather. Returns None (``tensor_dict`` at world size 1).)doc")
      .def(
          "isend_tensor_dict",
          [](const GroupPtr& g, py::object d, py::object dst, py::object ag, py::object agt,
             py::object stream) {
            return isend_tensor_dict(g, d, {dst, ag, agt, stream, py::none()});
          },
          "tensor_dict"_a, "dst"_a = py::none(), "all_gather_group"_a = py::none(),
          "all_gather_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "Non-blocking send_tensor_dict: returns the Handles (metadata first). The coordinator "
          "keeps the buffers alive until the sends complete, so the handles may be dropped.")
      .def(
          "recv_tensor_dict",
          [](const GroupPtr& g, py::object src, py::object ag, py::object agt, py::object stream,
             py::object library) {
            return recv_tensor_dict(g, {src, ag, agt, stream, library});
          },
          "src"_a = py::none(), "all_gather_group"_a = py::none(),
          "all_gather_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "array_library"_a = py::none(),
          "Receives a dict from group rank src (None: the previous rank); None at world size 1.")
      .def(
          "irecv_tensor_dict",
          [](const GroupPtr& g, py::object src, py::object ag, py::object agt, py::object stream,
             py::object library) {
            return irecv_tensor_dict(g, {src, ag, agt, stream, library});
          },
          "src"_a = py::none(), "all_gather_group"_a = py::none(),
          "all_gather_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "array_library"_a = py::none(), R"doc(
Non-blocking recv_tensor_dict: returns ``(tensor_dict, handles, postprocess)`` as vLLM. The dict's
arrays fill as the handles complete; then call each postprocess function in order (they run the
all_gather reassembly and update the dict). ``(None, [], [])`` at world size 1.)doc");
}

}  // namespace

void bind_group_object_ops(GroupClass& cls) {
  bind_objects(cls);
  bind_tensor_dicts(cls);
}

}  // namespace python
}  // namespace groupcoord
