// The tensor calls GroupCoordinator and DeviceCommunicator share (all_reduce, all_gather, ...),
// written once for both. Each call: import the arrays (no copy), run the C++ call without the GIL
// (interruptibly for host tensors, see blocking_call.h) on the right CUDA stream, give the result
// back as the caller's array type.
//
// torch and cupy CUDA inputs are borrowed (framework_array.h): the calls that enqueue CUDA work run
// inline, so the caller's arrays outlive every use of the views. all_reduce, all_gather and
// reduce_scatter write into `out=` or into an array of the caller's library (output_arg.h) and
// return it; the results of the other calls on such arrays (recv too, when its result is theirs)
// come from the same library's allocator (framework_allocator.h). No call waits on the host for
// the GPU.
//
// Every body captures what it uses by value, including `keep` (the Python-side owner of the
// target), because an interrupted call keeps running after the caller has returned.
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "array_import.h"
#include "blocking_call.h"
#include "dtype_arg.h"
#include "framework_allocator.h"
#include "framework_array.h"
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
/// True when `sizes` is None, or a list or tuple of `world_size` ints all equal to `each`: the
/// v-variant is then the plain collective (the C++ v-variants take the same path). Anything
/// else (numpy ints included) is false and left to the v-variant's own checks.
bool uniform_sizes(pybind11::handle sizes, int world_size, std::int64_t each);
/// `size=` of recv (an int, or a sequence of ints such as torch.Size).
Shape shape_from_python(pybind11::handle size, const std::string& label);
/// `dst=` / `src=` that may be None.
std::optional<int> optional_rank(pybind11::handle rank);

/// Runs `fn(*g.target, args...)` without the GIL (call_blocking). A call that runs on this
/// thread (every CUDA call) passes `args` by reference: nothing is copied or allocated; one that
/// runs on the helper thread copies them, and `g.keep`, into its body (it may be abandoned).
template <typename T, typename Fn, typename... Args>
auto run_op(BlockingKind kind, const OpTarget<T>& g, Fn fn, const Args&... args)
    -> decltype(fn(*g.target, args...)) {
  if (runs_inline(kind)) {
    pybind11::gil_scoped_release release;
    return fn(*g.target, args...);
  }
  return call_blocking(kind,
                       [t = g.target, keep = g.keep, fn, args...] { return fn(*t, args...); });
}

/// Runs `call(target, x, out)` (an out= overload) on `in`'s stream and returns `out`'s object.
template <typename T, typename Call>
pybind11::object run_into(const OpTarget<T>& g, const ImportedArray& in, OutputArray out,
                          Call call) {
  run_op(
      kind_for(in.tensor, out.tensor), g,
      [call](T& t, const Tensor& x, const Tensor& y, const StreamHandle& s) {
        with_stream(x.device(), s, [&] { call(t, x, y); });
      },
      in.tensor, out.tensor, in.stream);
  return std::move(out.object);
}

/// Whether `target` hands the v-variants to a device communicator. A coordinator without one
/// (world size 1, use_device_communicator=False) raises from its v-variants and must keep doing
/// so rather than take the plain call's path.
inline bool has_device_communicator(const GroupCoordinator& g) {
  return g.device_communicator() != nullptr;
}
inline bool has_device_communicator(const DeviceCommunicator&) { return true; }

/// all_gatherv / reduce_scatterv of a torch/cupy CUDA input with uniform `sizes` (see
/// uniform_sizes; `gather`: all_gatherv, else reduce_scatterv): the result array of the plain
/// call's shape, from the input's library, when the sizes agree with the input; else nullopt
/// (the v-variant runs, and names any mismatch itself).
template <typename T>
std::optional<OutputArray> uniform_output(const OpTarget<T>& g, const ImportedArray& in, int dim,
                                          pybind11::handle sizes, bool gather,
                                          const ArgContext& ctx) {
  if (!in.framework || !has_device_communicator(*g.target)) return std::nullopt;
  const int world_size = g.target->world_size();
  const int d = wrapped_dim(dim, in.tensor.shape().size());
  if (d < 0 || world_size <= 0) return std::nullopt;
  const std::int64_t n = in.tensor.shape()[static_cast<std::size_t>(d)];
  if (gather ? !uniform_sizes(sizes, world_size, n)
             : n % world_size != 0 || !uniform_sizes(sizes, world_size, n / world_size)) {
    return std::nullopt;
  }
  const std::optional<Shape> shape = gather ? gathered_shape(in.tensor.shape(), d, world_size)
                                            : scattered_shape(in.tensor.shape(), d, world_size);
  if (!shape) return std::nullopt;
  return output_array(pybind11::none(), in, &*shape, ctx, pybind11::none());
}

/// all_reduce into `out` (None: a new array for torch/cupy CUDA inputs, else the C++ result).
template <typename T>
pybind11::object op_all_reduce(const OpTarget<T>& g, pybind11::handle input, pybind11::handle out,
                               pybind11::handle stream) {
  ImportedArray in = import_array(input, {g.label, "all_reduce", "input_"}, Access::Read, stream,
                                  Ownership::Borrowed);
  if (auto o = output_array(out, in, &in.tensor.shape(), {g.label, "all_reduce", "out"}, stream)) {
    return run_into(g, in, std::move(*o),
                    [](T& t, const Tensor& x, const Tensor& y) { t.all_reduce(x, y); });
  }
  FrameworkResults results(in.library, in.tensor.device());
  Tensor result = run_op(
      kind_for(in.tensor), g,
      [](T& t, const Tensor& x, const StreamHandle& s) {
        return with_stream(x.device(), s, [&] { return t.all_reduce(x); });
      },
      in.tensor, in.stream);
  return export_like(result, in);
}

template <typename T>
pybind11::object op_all_gather(const OpTarget<T>& g, pybind11::handle input, int dim,
                               pybind11::handle out, pybind11::handle stream) {
  ImportedArray in = import_array(input, {g.label, "all_gather", "input_"}, Access::Read, stream,
                                  Ownership::Borrowed);
  const auto shape = gathered_shape(in.tensor.shape(), dim, g.target->world_size());
  if (auto o = output_array(out, in, shape ? &*shape : nullptr, {g.label, "all_gather", "out"},
                            stream)) {
    return run_into(g, in, std::move(*o),
                    [dim](T& t, const Tensor& x, const Tensor& y) { t.all_gather(x, dim, y); });
  }
  FrameworkResults results(in.library, in.tensor.device());
  Tensor result = run_op(
      kind_for(in.tensor), g,
      [dim](T& t, const Tensor& x, const StreamHandle& s) {
        return with_stream(x.device(), s, [&] { return t.all_gather(x, dim); });
      },
      in.tensor, in.stream);
  return export_like(result, in);
}

template <typename T>
pybind11::object op_reduce_scatter(const OpTarget<T>& g, pybind11::handle input, int dim,
                                   pybind11::handle out, pybind11::handle stream) {
  ImportedArray in = import_array(input, {g.label, "reduce_scatter", "input_"}, Access::Read,
                                  stream, Ownership::Borrowed);
  const auto shape = scattered_shape(in.tensor.shape(), dim, g.target->world_size());
  if (auto o = output_array(out, in, shape ? &*shape : nullptr, {g.label, "reduce_scatter", "out"},
                            stream)) {
    return run_into(g, in, std::move(*o),
                    [dim](T& t, const Tensor& x, const Tensor& y) { t.reduce_scatter(x, dim, y); });
  }
  FrameworkResults results(in.library, in.tensor.device());
  Tensor result = run_op(
      kind_for(in.tensor), g,
      [dim](T& t, const Tensor& x, const StreamHandle& s) {
        return with_stream(x.device(), s, [&] { return t.reduce_scatter(x, dim); });
      },
      in.tensor, in.stream);
  return export_like(result, in);
}

/// With uniform sizes, a torch/cupy CUDA input takes reduce_scatter's out= path (the C++
/// v-variant runs the same collective): the result comes from the caller's library, as
/// reduce_scatter's. Should that call refuse its arguments (ValueError, raised on every rank
/// before anything is enqueued), the v-variant runs instead and raises its own message.
template <typename T>
pybind11::object op_reduce_scatterv(const OpTarget<T>& g, pybind11::handle input, int dim,
                                    pybind11::handle sizes, pybind11::handle stream) {
  const ArgContext ctx{g.label, "reduce_scatterv", "input_"};
  ImportedArray in = import_array(input, ctx, Access::Read, stream, Ownership::Borrowed);
  if (auto o = uniform_output(g, in, dim, sizes, false, ctx)) {
    try {
      return run_into(g, in, std::move(*o), [dim](T& t, const Tensor& x, const Tensor& y) {
        t.reduce_scatter(x, dim, y);
      });
    } catch (const std::invalid_argument&) {
    }
  }
  FrameworkResults results(in.library, in.tensor.device());
  Tensor out = run_op(
      kind_for(in.tensor), g,
      [dim](T& t, const Tensor& x, const StreamHandle& s,
            const std::optional<std::vector<std::int64_t>>& v) {
        return with_stream(x.device(), s, [&] { return t.reduce_scatterv(x, dim, v); });
      },
      in.tensor, in.stream, sizes_from_python(sizes));
  return export_like(out, in);
}

/// all_gatherv of one array (returns one) or of a list of arrays (returns a list). One torch/cupy
/// CUDA array with uniform sizes takes all_gather's out= path, as reduce_scatterv above.
template <typename T>
pybind11::object op_all_gatherv(const OpTarget<T>& g, pybind11::handle input, int dim,
                                pybind11::handle sizes, pybind11::handle stream) {
  if (!PyList_Check(input.ptr()) && !PyTuple_Check(input.ptr())) {
    const ArgContext ctx{g.label, "all_gatherv", "input_"};
    ImportedArray in = import_array(input, ctx, Access::Read, stream, Ownership::Borrowed);
    if (auto o = uniform_output(g, in, dim, sizes, true, ctx)) {
      try {
        return run_into(g, in, std::move(*o),
                        [dim](T& t, const Tensor& x, const Tensor& y) { t.all_gather(x, dim, y); });
      } catch (const std::invalid_argument&) {
      }
    }
    FrameworkResults results(in.library, in.tensor.device());
    Tensor out = run_op(
        kind_for(in.tensor), g,
        [dim](T& t, const Tensor& x, const StreamHandle& s,
              const std::optional<std::vector<std::int64_t>>& v) {
          return with_stream(x.device(), s, [&] { return t.all_gatherv(x, dim, v); });
        },
        in.tensor, in.stream, sizes_from_python(sizes));
    return export_like(out, in);
  }
  std::vector<ImportedArray> ins;
  std::vector<Tensor> xs;
  for (pybind11::handle item : input) {
    ins.push_back(import_array(item, {g.label, "all_gatherv", "input_[i]"}, Access::Read, stream,
                               Ownership::Borrowed));
    xs.push_back(ins.back().tensor);
  }
  GC_CHECK(!xs.empty(), g.label, ".all_gatherv: input_ is an empty list");
  FrameworkResults results(ins.front().library, xs.front().device());
  std::vector<Tensor> outs = run_op(
      kind_for_all(xs), g,
      [dim](T& t, const std::vector<Tensor>& xs, const StreamHandle& s,
            const std::optional<std::vector<std::int64_t>>& v) {
        return with_stream(xs.front().device(), s, [&] { return t.all_gatherv(xs, dim, v); });
      },
      xs, ins.front().stream, sizes_from_python(sizes));
  pybind11::list result;
  for (std::size_t i = 0; i < outs.size(); ++i) result.append(export_like(outs[i], ins[i]));
  return result;
}

template <typename T>
pybind11::object op_gather(const OpTarget<T>& g, pybind11::handle input, int dst, int dim,
                           pybind11::handle stream) {
  ImportedArray in =
      import_array(input, {g.label, "gather", "input_"}, Access::Read, stream, Ownership::Borrowed);
  FrameworkResults results(in.library, in.tensor.device());
  std::optional<Tensor> out = run_op(
      kind_for(in.tensor), g,
      [dst, dim](T& t, const Tensor& x, const StreamHandle& s) {
        return with_stream(x.device(), s, [&] { return t.gather(x, dst, dim); });
      },
      in.tensor, in.stream);
  if (!out) return pybind11::none();
  return export_like(*out, in);
}

/// In place: returns `input` itself.
template <typename T>
pybind11::object op_broadcast(const OpTarget<T>& g, pybind11::handle input, int src,
                              pybind11::handle stream) {
  ImportedArray in = import_array(input, {g.label, "broadcast", "input_"}, Access::Write, stream,
                                  Ownership::Borrowed);
  run_op(
      kind_for(in.tensor), g,
      [src](T& t, const Tensor& x, const StreamHandle& s) {
        with_stream(x.device(), s, [&] { t.broadcast(x, src); });
      },
      in.tensor, in.stream);
  return pybind11::reinterpret_borrow<pybind11::object>(input);
}

template <typename T>
void op_send(const OpTarget<T>& g, pybind11::handle tensor, pybind11::handle dst,
             pybind11::handle stream) {
  ImportedArray in =
      import_array(tensor, {g.label, "send", "tensor"}, Access::Read, stream, Ownership::Borrowed);
  run_op(
      kind_for(in.tensor), g,
      [](T& t, const Tensor& x, const StreamHandle& s, const std::optional<int>& d) {
        with_stream(x.device(), s, [&] { t.send(x, d); });
      },
      in.tensor, in.stream, optional_rank(dst));
}

/// The result type: torch for a torch dtype, else `array_library`, else the device default.
template <typename T>
pybind11::object op_recv(const OpTarget<T>& g, Device device, pybind11::handle size,
                         pybind11::handle dtype, pybind11::handle src, pybind11::handle stream,
                         pybind11::handle array_library) {
  const std::string what = g.label + ".recv";
  const Shape shape = shape_from_python(size, g.label);
  const DType type = dtype_from_python(dtype, what.c_str());
  // The library of the result decides the stream too: the receive runs on that library's current
  // stream (a cupy capture stream, say), so that handing the result over orders nothing.
  const ArrayLibrary& library = is_torch_dtype(dtype)
                                    ? library_by_name("torch")
                                    : library_or_default(optional_library(array_library), device);
  const StreamHandle s = resolve_stream(stream, &library, device);
  const std::optional<int> peer = optional_rank(src);
  const std::optional<Framework> framework = framework_named(library);
  // The result array made by torch / cupy directly and received into: no DLPack export. Not
  // with stream=: the array belongs to the library's current stream, and the export below is
  // what orders that stream after the receive. Negative sizes: the C++ call's checks name them.
  if (framework && device.is_cuda() && stream.is_none() &&
      std::none_of(shape.begin(), shape.end(), [](std::int64_t n) { return n < 0; })) {
    Tensor view;
    pybind11::object result = framework_new(*framework, shape, dtype, type, device, &view);
    if (result) {
      run_op(
          BlockingKind::Enqueue, g,
          [](T& t, const Tensor& y, const StreamHandle& on, const std::optional<int>& r) {
            with_stream(y.device(), on, [&] { t.recv(y, r); });
          },
          view, s, peer);
      return result;
    }
  }
  const BlockingKind kind = device.is_cuda() ? BlockingKind::Enqueue : BlockingKind::Wait;
  FrameworkResults results(&library, device);
  Tensor out = call_blocking(kind, [t = g.target, keep = g.keep, shape, type, s, device, r = peer] {
    return with_stream(device, s, [&] { return t->recv(shape, type, r); });
  });
  return export_tensor(out, library, s);
}

}  // namespace python
}  // namespace groupcoord
