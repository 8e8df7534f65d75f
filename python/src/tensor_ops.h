// The tensor calls GroupCoordinator and DeviceCommunicator share (all_reduce, all_gather, ...),
// written once for both. Each call: import the arrays (no copy), run the C++ call without the GIL
// (interruptibly for host tensors, see blocking_call.h) on the right CUDA stream, give the result
// back as the caller's array type.
//
// torch and cupy CUDA inputs are borrowed (framework_array.h): the calls that enqueue CUDA work run
// inline, so the caller's arrays outlive every use of the views. all_reduce, all_gather and
// reduce_scatter write into `out=` or into an array of the caller's library (output_arg.h) and
// return it; no call waits on the host for the GPU.
//
// Every body captures what it uses by value, including `keep` (the Python-side owner of the
// target), because an interrupted call keeps running after the caller has returned.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "array_import.h"
#include "blocking_call.h"
#include "dtype_arg.h"
#include "groupcoord/device_communicator.h"
#include "groupcoord/group_coordinator.h"
#include "output_arg.h"
#include "py_tensor.h"

namespace groupcoord {
namespace python {

/// What a call runs on (a GroupCoordinator or a DeviceCommunicator), what keeps it alive, and
/// its label for messages.
template <typename T>
struct OpTarget {
  T* target;
  std::shared_ptr<const void> keep;
  const std::string& label;
};

/// Host collectives (the hot path: inline unless set_interruptible(collectives=True)); CUDA work
/// is only enqueued.
inline BlockingKind kind_for(const Tensor& tensor) {
  return tensor.device().is_cuda() ? BlockingKind::Enqueue : BlockingKind::Collective;
}

/// As above for an input and its output: inline when either is on CUDA (a borrowed view must
/// never be left to an abandoned call; such a pair is refused by the call's checks anyway).
inline BlockingKind kind_for(const Tensor& input, const Tensor& out) {
  return out.device().is_cuda() ? BlockingKind::Enqueue : kind_for(input);
}

/// As above for a list: inline when any is on CUDA (borrowed views).
inline BlockingKind kind_for_all(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    if (t.device().is_cuda()) return BlockingKind::Enqueue;
  }
  return BlockingKind::Collective;
}

/// `out` as the type `in` came as.
inline pybind11::object export_like(const Tensor& out, const ImportedArray& in) {
  return export_tensor(out, library_or_default(in.library, out.device()), in.stream);
}

/// `sizes=` (None or a sequence of ints).
std::optional<std::vector<std::int64_t>> sizes_from_python(pybind11::handle sizes);
/// `size=` of recv (an int, or a sequence of ints such as torch.Size).
Shape shape_from_python(pybind11::handle size, const std::string& label);
/// `dst=` / `src=` that may be None.
std::optional<int> optional_rank(pybind11::handle rank);

/// Runs `call(target, x, out)` (an out= overload) on `in`'s stream and returns `out`'s object.
template <typename T, typename Call>
pybind11::object run_into(const OpTarget<T>& g, const ImportedArray& in, OutputArray out,
                          Call call) {
  call_blocking(kind_for(in.tensor, out.tensor),
                [t = g.target, keep = g.keep, x = in.tensor, y = out.tensor, s = in.stream, call] {
                  with_stream(x.device(), s, [&] { call(*t, x, y); });
                });
  return std::move(out.object);
}

/// all_reduce into `out` (None: a new array for torch/cupy CUDA inputs, else the C++ result).
template <typename T>
pybind11::object op_all_reduce(const OpTarget<T>& g, pybind11::handle input,
                               pybind11::handle out, pybind11::handle stream) {
  ImportedArray in = import_array(input, {g.label, "all_reduce", "input_"}, Access::Read, stream,
                                  Ownership::Borrowed);
  if (auto o = output_array(out, in, in.tensor.shape(), {g.label, "all_reduce", "out"}, stream)) {
    return run_into(g, in, std::move(*o),
                    [](T& t, const Tensor& x, const Tensor& y) { t.all_reduce(x, y); });
  }
  Tensor result = call_blocking(kind_for(in.tensor),
                                [t = g.target, keep = g.keep, x = in.tensor, s = in.stream] {
                                  return with_stream(x.device(), s,
                                                     [&] { return t->all_reduce(x); });
                                });
  return export_like(result, in);
}

template <typename T>
pybind11::object op_all_gather(const OpTarget<T>& g, pybind11::handle input, int dim,
                               pybind11::handle out, pybind11::handle stream) {
  ImportedArray in = import_array(input, {g.label, "all_gather", "input_"}, Access::Read, stream,
                                  Ownership::Borrowed);
  const auto shape = gathered_shape(in.tensor.shape(), dim, g.target->world_size());
  if (auto o = output_array(out, in, shape, {g.label, "all_gather", "out"}, stream)) {
    return run_into(g, in, std::move(*o),
                    [dim](T& t, const Tensor& x, const Tensor& y) { t.all_gather(x, dim, y); });
  }
  Tensor result = call_blocking(
      kind_for(in.tensor), [t = g.target, keep = g.keep, x = in.tensor, s = in.stream, dim] {
        return with_stream(x.device(), s, [&] { return t->all_gather(x, dim); });
      });
  return export_like(result, in);
}

template <typename T>
pybind11::object op_reduce_scatter(const OpTarget<T>& g, pybind11::handle input, int dim,
                                   pybind11::handle out, pybind11::handle stream) {
  ImportedArray in = import_array(input, {g.label, "reduce_scatter", "input_"}, Access::Read,
                                  stream, Ownership::Borrowed);
  const auto shape = scattered_shape(in.tensor.shape(), dim, g.target->world_size());
  if (auto o = output_array(out, in, shape, {g.label, "reduce_scatter", "out"}, stream)) {
    return run_into(g, in, std::move(*o), [dim](T& t, const Tensor& x, const Tensor& y) {
      t.reduce_scatter(x, dim, y);
    });
  }
  Tensor result = call_blocking(
      kind_for(in.tensor), [t = g.target, keep = g.keep, x = in.tensor, s = in.stream, dim] {
        return with_stream(x.device(), s, [&] { return t->reduce_scatter(x, dim); });
      });
  return export_like(result, in);
}

template <typename T>
pybind11::object op_reduce_scatterv(const OpTarget<T>& g, pybind11::handle input, int dim,
                                    pybind11::handle sizes, pybind11::handle stream) {
  ImportedArray in =
      import_array(input, {g.label, "reduce_scatterv", "input_"}, Access::Read, stream,
                   Ownership::Borrowed);
  Tensor out =
      call_blocking(kind_for(in.tensor), [t = g.target, keep = g.keep, x = in.tensor, s = in.stream,
                                          dim, v = sizes_from_python(sizes)] {
        return with_stream(x.device(), s, [&] { return t->reduce_scatterv(x, dim, v); });
      });
  return export_like(out, in);
}

/// all_gatherv of one array (returns one) or of a list of arrays (returns a list).
template <typename T>
pybind11::object op_all_gatherv(const OpTarget<T>& g, pybind11::handle input, int dim,
                                pybind11::handle sizes, pybind11::handle stream) {
  const bool is_list =
      pybind11::isinstance<pybind11::list>(input) || pybind11::isinstance<pybind11::tuple>(input);
  std::vector<ImportedArray> ins;
  std::vector<Tensor> xs;
  if (is_list) {
    for (pybind11::handle item : input) {
      ins.push_back(
          import_array(item, {g.label, "all_gatherv", "input_[i]"}, Access::Read, stream,
                       Ownership::Borrowed));
      xs.push_back(ins.back().tensor);
    }
    GC_CHECK(!xs.empty(), g.label, ".all_gatherv: input_ is an empty list");
  } else {
    ins.push_back(import_array(input, {g.label, "all_gatherv", "input_"}, Access::Read, stream,
                               Ownership::Borrowed));
    xs.push_back(ins.back().tensor);
  }
  std::vector<Tensor> outs = call_blocking(
      kind_for_all(xs),
      [t = g.target, keep = g.keep, xs, s = ins.front().stream, dim, v = sizes_from_python(sizes)] {
        return with_stream(xs.front().device(), s, [&] { return t->all_gatherv(xs, dim, v); });
      });
  if (!is_list) return export_like(outs.front(), ins.front());
  pybind11::list result;
  for (std::size_t i = 0; i < outs.size(); ++i) result.append(export_like(outs[i], ins[i]));
  return result;
}

template <typename T>
pybind11::object op_gather(const OpTarget<T>& g, pybind11::handle input, int dst, int dim,
                           pybind11::handle stream) {
  ImportedArray in = import_array(input, {g.label, "gather", "input_"}, Access::Read, stream,
                                  Ownership::Borrowed);
  std::optional<Tensor> out = call_blocking(
      kind_for(in.tensor), [t = g.target, keep = g.keep, x = in.tensor, s = in.stream, dst, dim] {
        return with_stream(x.device(), s, [&] { return t->gather(x, dst, dim); });
      });
  if (!out) return pybind11::none();
  return export_like(*out, in);
}

/// In place: returns `input` itself.
template <typename T>
pybind11::object op_broadcast(const OpTarget<T>& g, pybind11::handle input, int src,
                              pybind11::handle stream) {
  ImportedArray in = import_array(input, {g.label, "broadcast", "input_"}, Access::Write, stream,
                                  Ownership::Borrowed);
  call_blocking(kind_for(in.tensor),
                [t = g.target, keep = g.keep, x = in.tensor, s = in.stream, src] {
                  with_stream(x.device(), s, [&] { t->broadcast(x, src); });
                });
  return pybind11::reinterpret_borrow<pybind11::object>(input);
}

template <typename T>
void op_send(const OpTarget<T>& g, pybind11::handle tensor, pybind11::handle dst,
             pybind11::handle stream) {
  ImportedArray in = import_array(tensor, {g.label, "send", "tensor"}, Access::Read, stream,
                                  Ownership::Borrowed);
  call_blocking(kind_for(in.tensor),
                [t = g.target, keep = g.keep, x = in.tensor, s = in.stream,
                 d = optional_rank(dst)] { with_stream(x.device(), s, [&] { t->send(x, d); }); });
}

/// The result type: torch for a torch dtype, else `array_library`, else the device default.
template <typename T>
pybind11::object op_recv(const OpTarget<T>& g, Device device, pybind11::handle size,
                         pybind11::handle dtype, pybind11::handle src, pybind11::handle stream,
                         pybind11::handle array_library) {
  const std::string what = g.label + ".recv";
  const Shape shape = shape_from_python(size, g.label);
  const DType type = dtype_from_python(dtype, what.c_str());
  const ArrayLibrary* library =
      is_torch_dtype(dtype) ? &library_by_name("torch") : optional_library(array_library);
  const StreamHandle s = resolve_stream(stream, library, device);
  const BlockingKind kind = device.is_cuda() ? BlockingKind::Enqueue : BlockingKind::Wait;
  Tensor out = call_blocking(
      kind, [t = g.target, keep = g.keep, shape, type, s, device, r = optional_rank(src)] {
        return with_stream(device, s, [&] { return t->recv(shape, type, r); });
      });
  return export_tensor(out, library_or_default(library, out.device()), s);
}

}  // namespace python
}  // namespace groupcoord
