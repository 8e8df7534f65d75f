// Module-level settings and the benchmark and test hooks.
#include <atomic>
#include <chrono>
#include <thread>

#include "array_import.h"
#include "array_library.h"
#include "bindings.h"
#include "blocking_call.h"
#include "deferred_release.h"
#include "groupcoord/tensor.h"
#include "output_arg.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

/// Test hook: takes a reference to `obj` and drops it on a thread of its own that never holds
/// the GIL (deferred_release.h), the way a tensor's last reference can die on a helper thread,
/// while this thread keeps the GIL. True when that thread was done within 5 s (it never waits for
/// the GIL); false when it was not (the GIL is then released until it is, and it was waiting).
bool release_on_another_thread(const py::object& obj) {
  PyObject* raw = obj.ptr();
  Py_INCREF(raw);
  std::atomic<bool> done{false};
  std::thread thread([raw, &done] {
    release_reference(raw);
    done.store(true);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool in_time = done.load();
  {
    py::gil_scoped_release release;
    thread.join();
  }
  return in_time;
}

/// `iterations` all_reduce calls of a 1-element float32 tensor in a C++ loop, without the GIL
/// (the reference the Python overhead benchmark compares against). Collective: every rank of the
/// group runs it with the same count. Returns the elapsed seconds.
double bench_all_reduce(const std::shared_ptr<PyGroup>& g, int iterations) {
  GroupCoordinator& c = g->get();
  Tensor x = Tensor::empty({1}, DType::Float32);
  *x.data_ptr<float>() = 1.0f;
  py::gil_scoped_release release;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) c.all_reduce(x);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The Python half of a tensor call without the collective: imports `input` as all_reduce does
/// (torch/cupy fast path: the attribute reads and the stream lookup) and finds its result array
/// (`out`, or a new array of the input's library). Returns that array (None: the C++ call would
/// allocate). Diagnostics for benchmarks/bench_host_overhead.py's breakdown.
py::object probe_tensor_path(py::handle input, py::handle out) {
  static const std::string owner = "_probe_tensor_path";
  ImportedArray in = import_array(input, {owner, "all_reduce", "input_"}, Access::Read, py::none(),
                                  Ownership::Borrowed);
  auto o = output_array(out, in, &in.tensor.shape(), {owner, "all_reduce", "out"}, py::none());
  if (!o) return py::none();
  return std::move(o->object);
}

}  // namespace

void bind_settings(py::module_& m) {
  m.def("set_default_array_library", &set_default_library, "name"_a, "device_type"_a = "cpu",
        R"doc(
Array type of results that have no input to mirror (recv, received tensor dicts) on devices of
``device_type`` ("cpu" or "cuda"): "numpy", "torch", "cupy", "dlpack" (groupcoord.Tensor) or any
importable module with from_dlpack. Defaults: on CPU torch once the process has imported torch
(a torch program gets torch tensors, as from vLLM), else numpy; on CUDA torch when importable,
else cupy.)doc");
  m.def("get_default_array_library", &default_library_name, "device_type"_a = "cpu",
        "Name of the default array library for ``device_type``.");
  m.def("set_interruptible", &set_interruptible, "enabled"_a, "collectives"_a = false, R"doc(
Whether Ctrl-C (any signal handler that raises) interrupts blocking calls made on the main thread.
Such calls then run on a helper thread while the main thread waits and handles signals, which
costs two thread wake-ups per call. ``enabled`` (default True) covers the calls that wait by
nature: rendezvous, group creation, recv, objects, tensor dicts, barrier, Handle.wait, message
queues. ``collectives`` (default False) also covers host tensor collectives (all_reduce,
all_gather, ..., send), the hot path, which otherwise run inline and end at the group's deadline
if a peer is gone. Environment: GROUPCOORD_PY_INTERRUPTIBLE=0 / 1 / all. An interrupted call keeps
running in the background until it ends; its group is then unusable (destroy it or exit).)doc");
  m.def("is_interruptible", &interruptible_waits,
        "Whether waiting calls are interruptible (set_interruptible's ``enabled``).");
  m.def("are_collectives_interruptible", &interruptible_collectives,
        "Whether host collectives are interruptible (set_interruptible's ``collectives``).");
  m.def("_abandoned_calls_in_flight", &abandoned_calls_in_flight,
        "Interrupted calls still running on helper threads (diagnostics).");
  m.def("_probe_tensor_path", &probe_tensor_path, "input_"_a, "out"_a = py::none(),
        "Benchmark hook: a tensor call's Python work (import, stream, result array) without "
        "the collective; returns the result array (None: the C++ call would allocate it).");
  m.def("_release_on_another_thread", &release_on_another_thread, "obj"_a,
        "Test hook: a reference to obj taken, then dropped on a thread without the GIL.");
  m.def("_bench_all_reduce", &bench_all_reduce, "group"_a, "iterations"_a,
        "Benchmark hook: seconds taken by `iterations` C++ all_reduce calls of 1 float32.");
}

}  // namespace python
}  // namespace groupcoord
