// Host time per CUDA call, groupcoord against raw NCCL on the same ranks, in the same processes
// and the same run (issue: "CUDA hot path"). For each op and size it times `--calls` back-to-back
// calls from call to return (the GPU runs behind; the stream is drained between rounds, untimed),
// `--rounds` rounds alternating raw and groupcoord, and prints the medians, the difference and
// the ratio. Rows:
//   raw    NCCL called directly (the same library groupcoord loaded) on a blocking communicator
//          of the same ranks, preallocated buffers, the same stream
//   split  (1 rank) the same raw calls on a communicator made as groupcoord makes its own (a
//          non-blocking parent split into a blocking child): NCCL's own cost on such a one
//   +event (1 rank) split, plus the capture check and event record the watchdog's tracking adds
//   +drv   (1 rank) +event through the driver API (cuStreamIsCapturing, cuEventRecord) rather
//          than the runtime's wrappers
//   +write (1 rank) split, plus a cuStreamWriteValue32 to pinned host memory: the cheapest stream
//          marker a watchdog could poll instead of an event
//   nccl   (1 rank) NcclComm::enqueue on a communicator of its own: the whole tracking (locks,
//          capture check, event, in-flight entry) without the DeviceCommunicator's checks
//   comm   the "cuda" DeviceCommunicator (what GroupCoordinator hands CUDA tensors to; at world
//          size 1 the coordinator bypasses, so this is the row that runs there)
//   coord  GroupCoordinator (world size >= 2), symmetric memory off, like comm
//   symm   the communicator with NCCL symmetric memory on (--symm; all_reduce always routed)
// Ops: all_reduce, all_gather (dim 0), reduce_scatter (dim 0), each also with a caller-provided
// output (out=), all_gatherv / reduce_scatterv with uniform sizes, broadcast, send/recv (world
// size 2: rank 0 sends, rank 1 receives). Sizes: 1 x f32, 4 KiB bf16, 1 MiB bf16 (the input of
// all_reduce / all_gather / broadcast / send; reduce_scatter's output).
//
//   mpirun -np 2 bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0" "$@"' \
//       build/benchmarks/bench_host_overhead [--json PATH] [--rounds 9] [--calls 200] [--symm]
//       [--timeout-s 60] [--trace]
//
// --timeout-s is the groups' deadline (a hang ends in an error naming the op); --trace makes
// every rank say on stderr which op and size it is about to time. --profile
// raw|nccl|comm|comm-alloc (1 rank) skips the table and runs only that path's all_reduce of 4 KiB
// bf16 (comm: with out=) for --profile-seconds (default 5), for a sampling profiler to compare
// the paths. --warmup-s S (1 rank, default 3): raw and comm calls alternate for S seconds before
// anything is timed (0: none).
// A short breakdown first prints what single CUDA runtime calls on the path cost here. At 1 rank
// the table is followed by sustained calls (20,000 per round and path, so that each path's own
// watchdog passes fall into its own time, which rounds of 200 calls hide) and a last section times
// CUDA graph replays: one graph of 100 captured all_reduce(out) calls of
// 4 KiB bf16 through the communicator against the same built from raw NCCL calls (issue "CUDA
// graphs"): µs per replay, launch to completion, and the ratio.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/nccl/nccl_api.h"
#include "cuda/nccl/nccl_comm.h"
#include "cuda/nccl/steady_nanoseconds.h"
#include "cuda/runtime/device_guard.h"
#include "cuda/runtime/driver_calls.h"
#include "groupcoord/cuda/stream.h"
#include "groupcoord/groupcoord.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/world.h"

namespace {

namespace gc = groupcoord;
using gc::DType;
using gc::Tensor;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string json;
  int rounds = 9;
  int calls = 200;
  bool symm = false;
  int timeout_s = 60;   ///< the groups' deadline: a hang ends with an error naming the op
  bool trace = false;   ///< each rank says on stderr what it is about to time
  std::string profile;  ///< raw, comm or nccl: loop that path only (for a profiler)
  double profile_seconds = 5;
  double warmup_s = 3;  ///< 1 rank: raw and comm calls alternating before anything is timed
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--json" && has_value) {
      o.json = argv[++i];
    } else if (a == "--rounds" && has_value) {
      o.rounds = std::atoi(argv[++i]);
    } else if (a == "--calls" && has_value) {
      o.calls = std::atoi(argv[++i]);
    } else if (a == "--symm") {
      o.symm = true;
    } else if (a == "--timeout-s" && has_value) {
      o.timeout_s = std::atoi(argv[++i]);
    } else if (a == "--trace") {
      o.trace = true;
    } else if (a == "--profile" && has_value) {
      o.profile = argv[++i];
    } else if (a == "--profile-seconds" && has_value) {
      o.profile_seconds = std::atof(argv[++i]);
    } else if (a == "--warmup-s" && has_value) {
      o.warmup_s = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: bench_host_overhead [--json PATH] [--rounds N] [--calls N] [--symm] "
                   "[--timeout-s S] [--trace] [--profile raw|nccl|comm|comm-alloc] "
                   "[--profile-seconds S] [--warmup-s S]\n");
      std::exit(2);
    }
  }
  return o;
}

struct Size {
  const char* label;
  DType dtype;
  std::int64_t elements;
};

const Size kSizes[] = {{"1xf32", DType::Float32, 1},
                       {"4KiB-bf16", DType::BFloat16, 2048},
                       {"1MiB-bf16", DType::BFloat16, 512 * 1024}};

ncclDataType_t nccl_type(DType dtype) {
  return dtype == DType::Float32 ? ncclFloat32 : ncclBfloat16;
}

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) {
    throw std::runtime_error(std::string("raw NCCL ") + what +
                             " failed: " + std::to_string(static_cast<int>(result)));
  }
}

/// A blocking NCCL communicator over the world, its id shared through groupcoord's world group.
ncclComm_t raw_communicator(const gc::cuda::NcclApi& api, gc::ProcessGroup& world) {
  ncclUniqueId id{};
  if (world.rank() == 0) check_nccl(api.GetUniqueId(&id), "ncclGetUniqueId");
  world.broadcast(&id, sizeof(id), DType::UInt8, 0);
  ncclComm_t comm = nullptr;
  check_nccl(api.CommInitRankConfig(&comm, world.size(), id, world.rank(), nullptr),
             "ncclCommInitRank");
  return comm;
}

/// The raw communicator made the way NcclComm makes its own (a non-blocking parent split into a
/// blocking child): tells whether NCCL itself costs more on such a communicator than on one
/// initialised blocking.
ncclComm_t raw_split_communicator(const gc::cuda::NcclApi& api, gc::ProcessGroup& world) {
  ncclUniqueId id{};
  if (world.rank() == 0) check_nccl(api.GetUniqueId(&id), "ncclGetUniqueId");
  world.broadcast(&id, sizeof(id), DType::UInt8, 0);
  auto settle = [&](ncclComm_t comm, const char* what) {
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) check_nccl(api.CommGetAsyncError(comm, &state), what);
    check_nccl(state, what);
  };
  ncclConfig_t nonblocking = NCCL_CONFIG_INITIALIZER;
  nonblocking.blocking = 0;
  ncclComm_t parent = nullptr;
  const ncclResult_t init =
      api.CommInitRankConfig(&parent, world.size(), id, world.rank(), &nonblocking);
  if (init != ncclInProgress) check_nccl(init, "ncclCommInitRankConfig (non-blocking)");
  settle(parent, "ncclCommInitRankConfig (non-blocking)");
  ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
  blocking.blocking = 1;
  ncclComm_t child = nullptr;
  const ncclResult_t split = api.CommSplit(parent, 0, world.rank(), &child, &blocking);
  if (split != ncclInProgress) check_nccl(split, "ncclCommSplit");
  settle(parent, "ncclCommSplit");
  settle(child, "ncclCommSplit (child)");
  api.CommDestroy(parent);
  return child;
}

/// A driver function through the runtime's entry points (no link against libcuda); nullptr
/// when this driver has none.
template <typename Fn>
Fn driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const bool ok = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) ==
                      cudaSuccess &&
                  found == cudaDriverEntryPointSuccess;
  return ok ? reinterpret_cast<Fn>(fn) : nullptr;
}

/// cuStreamWriteValue32: the cheapest stream marker a watchdog could poll.
using StreamWriteValue32 = int (*)(cudaStream_t stream, void* address, std::uint32_t value,
                                   unsigned flags);

StreamWriteValue32 stream_write_value32() {
  return driver_function<StreamWriteValue32>("cuStreamWriteValue32");
}

/// The driver's capture check and event record.
struct DriverTracking {
  CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*record)(CUevent, CUstream) = nullptr;
};

DriverTracking driver_tracking() {
  DriverTracking d;
  d.is_capturing = driver_function<decltype(d.is_capturing)>("cuStreamIsCapturing");
  d.record = driver_function<decltype(d.record)>("cuEventRecord");
  return d;
}

/// One timed thing: `calls` calls of `fn` (host time), the stream drained afterwards.
using Body = std::function<void()>;

double time_round(const Body& body, int calls, cudaStream_t stream, gc::ProcessGroup& world) {
  world.barrier();
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i) body();
  const auto stop = Clock::now();
  cudaStreamSynchronize(stream);
  return std::chrono::duration<double, std::micro>(stop - start).count() / calls;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  std::string op, size, path;
  double us = 0;
};

/// Times the bodies of one (op, size), rounds alternating between them; returns the medians.
std::vector<double> time_alternating(const std::vector<Body>& bodies, const Options& o,
                                     cudaStream_t stream, gc::ProcessGroup& world) {
  for (const Body& body : bodies) {
    for (int i = 0; i < 5; ++i) body();  // warm-up: connections, allocator, scratch
  }
  cudaStreamSynchronize(stream);
  std::vector<std::vector<double>> samples(bodies.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (std::size_t b = 0; b < bodies.size(); ++b) {
      samples[b].push_back(time_round(bodies[b], o.calls, stream, world));
    }
  }
  std::vector<double> medians;
  for (auto& s : samples) medians.push_back(median(s));
  return medians;
}

/// Cost of single runtime calls on the path, for reading the table.
void print_breakdown(cudaStream_t stream, gc::Device device, gc::DeviceCommunicator& comm) {
  constexpr int kN = 2000;
  cudaEvent_t event;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  auto per_call = [&](const std::function<void()>& fn) {
    for (int i = 0; i < 100; ++i) fn();  // warm-up: first allocations grow the pool
    const auto start = Clock::now();
    for (int i = 0; i < kN; ++i) fn();
    return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kN;
  };
  const double record = per_call([&] { cudaEventRecord(event, stream); });
  cudaStreamSynchronize(stream);
  const double capturing = per_call([&] {
    cudaStreamCaptureStatus status;
    cudaStreamIsCapturing(stream, &status);
  });
  unsigned long long id = 0;
  const double get_id = per_call([&] { gc::cuda::stream_id(stream, &id); });
  cudaEventRecord(event, stream);
  cudaStreamSynchronize(stream);
  const double query = per_call([&] { cudaEventQuery(event); });
  const double get_device = per_call([&] {
    int d;
    cudaGetDevice(&d);
  });
  const double empty = per_call([&] { Tensor t = Tensor::empty({1024}, DType::Float32, device); });
  // Everything of the communicator's call but NCCL and the event: an empty input returns after
  // the checks, the device guard and the stream lookup.
  Tensor none = Tensor::empty({0}, DType::Float32, device);
  const double checks = per_call([&] { comm.all_reduce(none, none); });
  cudaStreamSynchronize(stream);
  // The clocks an operation's deadline could be read from (a VM's clock source decides whether
  // the fine one is a vDSO read or a system call).
  volatile std::int64_t sink = 0;
  const double fine_clock = per_call([&] { sink = Clock::now().time_since_epoch().count(); });
  const double coarse_clock = per_call([&] { sink = gc::cuda::coarse_steady_nanoseconds(); });
  std::printf(
      "breakdown (ns per call): cudaEventRecord %.0f, cudaStreamIsCapturing %.0f, "
      "cuStreamGetId %.0f, cudaEventQuery (completed) %.0f, cudaGetDevice %.0f, Tensor::empty+free "
      "(4 KiB, CUDA allocator) %.0f, "
      "comm.all_reduce(out) of 0 elements %.0f, steady_clock::now %.0f, "
      "CLOCK_MONOTONIC_COARSE %.0f\n",
      record, capturing, get_id, query, get_device, empty, checks, fine_clock, coarse_clock);
  cudaEventDestroy(event);
}

/// all_reduce of 4 KiB bf16 on one path, as one call: "raw" NCCL, "nccl" NcclComm::enqueue (the
/// tracking alone), "comm" the communicator with `out=`, "comm-alloc" the communicator returning
/// a new result.
Body all_reduce_path(const std::string& path, gc::DeviceCommunicator& comm,
                     const gc::cuda::NcclApi& api, ncclComm_t raw, gc::cuda::NcclComm& tracked,
                     gc::Device device, cudaStream_t stream, const Tensor& x, const Tensor& out) {
  const std::size_t count = static_cast<std::size_t>(x.numel());
  void* in_ptr = x.data_ptr();
  void* out_ptr = out.data_ptr();
  auto raw_call = [&api, in_ptr, out_ptr, count, stream](ncclComm_t c) {
    return api.AllReduce(in_ptr, out_ptr, count, ncclBfloat16, ncclSum, c, stream);
  };
  if (path == "raw") return [raw_call, raw] { raw_call(raw); };
  if (path == "comm") return [&comm, x, out] { comm.all_reduce(x, out); };
  if (path == "comm-alloc") return [&comm, x] { comm.all_reduce(x); };
  if (path == "nccl") {
    return [raw_call, &tracked, device, stream] {
      gc::cuda::DeviceGuard guard(device);
      tracked.enqueue("bench", stream,
                      [&](const gc::cuda::NcclApi&, ncclComm_t c) { return raw_call(c); });
    };
  }
  throw std::runtime_error("--profile takes raw, comm, comm-alloc or nccl, not " + path);
}

/// Host µs per call of `blocks` blocks of 200 back-to-back calls, the stream drained (untimed)
/// after each block.
double time_blocks(const Body& body, int blocks, cudaStream_t stream) {
  double busy_us = 0;
  for (int b = 0; b < blocks; ++b) {
    const auto start = Clock::now();
    for (int i = 0; i < 200; ++i) body();
    busy_us += std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    cudaStreamSynchronize(stream);
  }
  return busy_us / (200.0 * blocks);
}

/// The 4 KiB bf16 all_reduce input (zeros) and output of the profile, warm-up, sustained and
/// graph sections.
std::pair<Tensor, Tensor> small_all_reduce_operands(gc::Device device, cudaStream_t stream) {
  Tensor x = Tensor::empty({2048}, DType::BFloat16, device);
  Tensor out = Tensor::empty({2048}, DType::BFloat16, device);
  cudaMemsetAsync(x.data_ptr(), 0, x.nbytes(), stream);
  return {x, out};
}

/// --profile: one path's all_reduce of 4 KiB bf16, back to back for the given time, so that a
/// sampling profiler sees that path alone.
void profile_path(const Options& o, const Body& body, cudaStream_t stream) {
  const auto stop = Clock::now() + std::chrono::duration<double>(o.profile_seconds);
  long blocks = 0;
  double us = 0;
  while (Clock::now() < stop) {
    us += time_blocks(body, 1, stream);
    ++blocks;
  }
  std::printf("profile %s: %ld calls, %.2f host µs per call\n", o.profile.c_str(), blocks * 200,
              us / blocks);
}

/// --warmup-s (1 rank): blocks of raw and comm all_reduce(out) calls alternating for that long
/// before anything is timed. A machine fresh from its start ran the first seconds' rows up to 1.4x
/// slower on every path (raw included) and then settled (session 16); the first and last blocks'
/// raw figures are printed so that such a change shows.
void warm_up(double seconds, const Body& raw, const Body& comm, cudaStream_t stream) {
  const auto stop = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<double> raw_us;
  while (Clock::now() < stop) {
    raw_us.push_back(time_blocks(raw, 1, stream));
    time_blocks(comm, 1, stream);
  }
  if (raw_us.empty()) return;
  const std::size_t tenth = std::max<std::size_t>(1, raw_us.size() / 10);
  const std::vector<double> first(raw_us.begin(), raw_us.begin() + tenth);
  const std::vector<double> last(raw_us.end() - tenth, raw_us.end());
  std::printf(
      "warm-up: %.1f s of raw and comm all_reduce(out) 4 KiB bf16 alternating; raw µs per "
      "call, median of the first tenth %.2f, of the last %.2f\n",
      seconds, median(first), median(last));
}

/// Sustained calls (1 rank): the table's rounds of 200 calls hide what the watchdog's passes (every
/// 10 ms while work is in flight) cost, because a pass mostly falls into another column's round.
/// Here each path runs 20,000 calls per round, so its own watchdog passes land in its own time.
void time_sustained(gc::DeviceCommunicator& comm, const gc::cuda::NcclApi& api, ncclComm_t raw,
                    gc::cuda::NcclComm& tracked, gc::Device device, cudaStream_t stream,
                    std::vector<Row>& rows) {
  Tensor x, out;
  std::tie(x, out) = small_all_reduce_operands(device, stream);
  const char* paths[] = {"raw", "nccl", "comm", "comm-alloc"};
  std::vector<Body> bodies;
  for (const char* p : paths) {
    bodies.push_back(all_reduce_path(p, comm, api, raw, tracked, device, stream, x, out));
  }
  constexpr int kRounds = 5;
  std::vector<std::vector<double>> us(bodies.size());
  for (int r = 0; r < kRounds; ++r) {
    for (std::size_t p = 0; p < bodies.size(); ++p)
      us[p].push_back(time_blocks(bodies[p], 100, stream));
  }
  std::printf("sustained all_reduce of 4 KiB bf16 (%d rounds of 20000 calls per path, medians):",
              kRounds);
  const double raw_us = median(us[0]);
  for (std::size_t p = 0; p < bodies.size(); ++p) {
    const double m = median(us[p]);
    rows.push_back({"all_reduce sustained", "4KiB-bf16", paths[p], m});
    if (p == 0) {
      std::printf(" raw %.2f µs", m);
    } else {
      std::printf(", %s %.2f (%+.2f)", paths[p], m, m - raw_us);
    }
  }
  std::printf("\n");
}

/// Captures `calls` on `stream` into an instantiated graph (global capture mode).
cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& calls) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess) {
    throw std::runtime_error("cudaStreamBeginCapture failed");
  }
  calls();
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess ||
      cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    throw std::runtime_error("capturing the graph failed");
  }
  cudaGraphDestroy(graph);
  return exec;
}

/// Graph replays: 100 all_reduce(out) of 4 KiB bf16, groupcoord's against raw NCCL's, rounds
/// alternating; prints µs per replay (launch to completion) and the ratio.
void time_graph_replays(const Options& o, gc::DeviceCommunicator& comm,
                        const gc::cuda::NcclApi& api, ncclComm_t raw, gc::Device device,
                        cudaStream_t stream, gc::ProcessGroup& world, std::vector<Row>& rows) {
  constexpr int kCallsPerGraph = 100;
  constexpr int kReplaysPerRound = 50;
  Tensor x, out;
  std::tie(x, out) = small_all_reduce_operands(device, stream);
  // Warm-up outside the captures (both communicators connect), as engines do.
  comm.all_reduce(x, out);
  api.AllReduce(x.data_ptr(), out.data_ptr(), 2048, ncclBfloat16, ncclSum, raw, stream);
  cudaStreamSynchronize(stream);
  cudaGraphExec_t ours = capture_graph(stream, [&] {
    for (int i = 0; i < kCallsPerGraph; ++i) comm.all_reduce(x, out);
  });
  cudaGraphExec_t theirs = capture_graph(stream, [&] {
    for (int i = 0; i < kCallsPerGraph; ++i) {
      api.AllReduce(x.data_ptr(), out.data_ptr(), 2048, ncclBfloat16, ncclSum, raw, stream);
    }
  });
  auto round = [&](cudaGraphExec_t exec) {
    world.barrier();
    const auto start = Clock::now();
    for (int i = 0; i < kReplaysPerRound; ++i) cudaGraphLaunch(exec, stream);
    cudaStreamSynchronize(stream);
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
           kReplaysPerRound;
  };
  round(ours);
  round(theirs);
  std::vector<double> ours_us, theirs_us;
  for (int r = 0; r < o.rounds; ++r) {
    ours_us.push_back(round(ours));
    theirs_us.push_back(round(theirs));
  }
  const double a = median(ours_us), b = median(theirs_us);
  if (world.rank() == 0) {
    std::printf(
        "graph replay (%d all_reduce(out) of 4 KiB bf16 per graph, %d rounds of %d "
        "replays): raw NCCL %.2f µs, groupcoord %.2f µs per replay, ratio %.4f\n",
        kCallsPerGraph, o.rounds, kReplaysPerRound, b, a, a / b);
  }
  rows.push_back({"graph_replay_100_all_reduce", "4KiB-bf16", "raw", b});
  rows.push_back({"graph_replay_100_all_reduce", "4KiB-bf16", "comm", a});
  cudaGraphExecDestroy(ours);
  cudaGraphExecDestroy(theirs);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("bench_host_overhead: no CUDA device visible; nothing to measure\n");
    return 0;
  }
  try {
    gc::init_distributed_environment(-1, -1, "env://", -1, "nccl",
                                     std::chrono::seconds(o.timeout_s));
    const gc::RendezvousResult info = gc::world_info();
    const int n = info.world_size;
    const int rank = info.rank;
    const gc::Device device = gc::Device::cuda(info.local_rank % gpus);
    cudaSetDevice(device.index);
    cudaStream_t stream = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    gc::CudaStreamGuard stream_guard(device, stream);
    std::shared_ptr<gc::ProcessGroup> world = gc::world_group();

    const gc::cuda::NcclApi& api = gc::cuda::nccl_api();
    ncclComm_t raw = raw_communicator(api, *world);
    // One rank only: two more spinning NCCL kernels per call would slow a shared GPU further.
    ncclComm_t raw_split = n == 1 ? raw_split_communicator(api, *world) : nullptr;
    cudaEvent_t tracking_event = nullptr;
    cudaEventCreateWithFlags(&tracking_event, cudaEventDisableTiming);
    // One rank only, as raw_split: the cheapest stream marker, and NcclComm's own tracking.
    const StreamWriteValue32 write_value = n == 1 ? stream_write_value32() : nullptr;
    const DriverTracking driver = driver_tracking();
    const bool with_driver = n == 1 && driver.is_capturing && driver.record;
    std::uint32_t* marker = nullptr;
    if (write_value) cudaHostAlloc(reinterpret_cast<void**>(&marker), 64, cudaHostAllocMapped);
    std::shared_ptr<gc::cuda::NcclComm> tracked =
        n == 1 ? gc::cuda::NcclComm::create(world, device, "bench-nccl") : nullptr;
    gc::register_builtin_device_communicators();
    gc::DeviceCommunicatorContext context;
    context.cpu_group = world;
    context.device = device;
    context.unique_name = "bench-comm";
    std::unique_ptr<gc::DeviceCommunicator> comm = gc::create_device_communicator("cuda", context);
    // The coordinator (plain NCCL path, as comm) is made before symmetric memory is switched on.
    std::unique_ptr<gc::GroupCoordinator> coord;
    if (n >= 2) {
      std::vector<int> all(n);
      std::iota(all.begin(), all.end(), 0);
      coord = std::make_unique<gc::GroupCoordinator>(std::vector<std::vector<int>>{all},
                                                     info.local_rank, "nccl", true, false,
                                                     std::string("bench-coord"));
    }
    std::unique_ptr<gc::DeviceCommunicator> symm;
    if (o.symm) {
      setenv("GROUPCOORD_USE_NCCL_SYMM_MEM", "1", 1);
      setenv("GROUPCOORD_SYMM_ALL_REDUCE", "always", 1);
      context.unique_name = "bench-symm";
      symm = gc::create_device_communicator("cuda", context);
    }
    if (!o.profile.empty()) {
      if (n != 1) throw std::runtime_error("--profile runs at 1 rank");
      Tensor x, out;
      std::tie(x, out) = small_all_reduce_operands(device, stream);
      profile_path(o, all_reduce_path(o.profile, *comm, api, raw, *tracked, device, stream, x, out),
                   stream);
    }
    const bool print = rank == 0 && o.profile.empty();
    if (print && n == 1 && o.warmup_s > 0) {
      Tensor x, out;
      std::tie(x, out) = small_all_reduce_operands(device, stream);
      warm_up(o.warmup_s, all_reduce_path("raw", *comm, api, raw, *tracked, device, stream, x, out),
              all_reduce_path("comm", *comm, api, raw, *tracked, device, stream, x, out), stream);
    }
    if (print) {
      std::printf(
          "bench_host_overhead: %d rank(s), %d GPU(s) visible, NCCL %d, %d rounds of %d "
          "calls, host µs per call (median)\n",
          n, gpus, api.version, o.rounds, o.calls);
      print_breakdown(stream, device, *comm);
      std::printf("%-22s %-10s %9s %9s %9s %9s %9s %9s %9s %9s %9s %8s %9s\n", "op", "size",
                  "raw_us", "split_us", "+event", "+drv", "+write", "nccl_us", "comm_us",
                  "coord_us", "symm_us", "diff_us", "ratio");
    }
    std::vector<Row> rows;
    const std::vector<Size> sizes = o.profile.empty()
                                        ? std::vector<Size>(std::begin(kSizes), std::end(kSizes))
                                        : std::vector<Size>();
    for (const Size& size : sizes) {
      const std::int64_t e = size.elements;
      const std::size_t count = static_cast<std::size_t>(e);
      const ncclDataType_t type = nccl_type(size.dtype);
      Tensor x = Tensor::empty({e}, size.dtype, device);
      Tensor wide = Tensor::empty({e * n}, size.dtype, device);
      Tensor out_same = Tensor::empty({e}, size.dtype, device);
      Tensor out_wide = Tensor::empty({e * n}, size.dtype, device);
      cudaMemsetAsync(x.data_ptr(), 0, x.nbytes(), stream);
      cudaMemsetAsync(wide.data_ptr(), 0, wide.nbytes(), stream);
      cudaStreamSynchronize(stream);
      const std::vector<std::int64_t> uniform(n, e);
      struct Case {
        std::string op;
        std::function<void(ncclComm_t)> raw;
        std::function<void(gc::DeviceCommunicator&)> comm;
        std::function<void(gc::GroupCoordinator&)> coord;
        bool symmetric_path = false;
      };
      std::vector<Case> cases = {
          {"all_reduce",
           [&](ncclComm_t r) {
             api.AllReduce(x.data_ptr(), out_same.data_ptr(), count, type, ncclSum, r, stream);
           },
           [&](gc::DeviceCommunicator& c) { c.all_reduce(x); },
           [&](gc::GroupCoordinator& g) { g.all_reduce(x); }, true},
          {"all_reduce(out)",
           [&](ncclComm_t r) {
             api.AllReduce(x.data_ptr(), out_same.data_ptr(), count, type, ncclSum, r, stream);
           },
           [&](gc::DeviceCommunicator& c) { c.all_reduce(x, out_same); },
           [&](gc::GroupCoordinator& g) { g.all_reduce(x, out_same); }, true},
          {"all_gather",
           [&](ncclComm_t r) {
             api.AllGather(x.data_ptr(), out_wide.data_ptr(), count, type, r, stream);
           },
           [&](gc::DeviceCommunicator& c) { c.all_gather(x, 0); },
           [&](gc::GroupCoordinator& g) { g.all_gather(x, 0); }, true},
          {"all_gather(out)",
           [&](ncclComm_t r) {
             api.AllGather(x.data_ptr(), out_wide.data_ptr(), count, type, r, stream);
           },
           [&](gc::DeviceCommunicator& c) { c.all_gather(x, 0, out_wide); },
           [&](gc::GroupCoordinator& g) { g.all_gather(x, 0, out_wide); }, true},
          {"reduce_scatter",
           [&](ncclComm_t r) {
             api.ReduceScatter(wide.data_ptr(), out_same.data_ptr(), count, type, ncclSum, r,
                               stream);
           },
           [&](gc::DeviceCommunicator& c) { c.reduce_scatter(wide, 0); },
           [&](gc::GroupCoordinator& g) { g.reduce_scatter(wide, 0); }, true},
          {"reduce_scatter(out)",
           [&](ncclComm_t r) {
             api.ReduceScatter(wide.data_ptr(), out_same.data_ptr(), count, type, ncclSum, r,
                               stream);
           },
           [&](gc::DeviceCommunicator& c) { c.reduce_scatter(wide, 0, out_same); },
           [&](gc::GroupCoordinator& g) { g.reduce_scatter(wide, 0, out_same); }, true},
          {"all_gatherv(uniform)",
           [&](ncclComm_t r) {
             api.AllGather(x.data_ptr(), out_wide.data_ptr(), count, type, r, stream);
           },
           [&](gc::DeviceCommunicator& c) { c.all_gatherv(x, 0, uniform); },
           [&](gc::GroupCoordinator& g) { g.all_gatherv(x, 0, uniform); }},
          {"reduce_scatterv(uniform)",
           [&](ncclComm_t r) {
             api.ReduceScatter(wide.data_ptr(), out_same.data_ptr(), count, type, ncclSum, r,
                               stream);
           },
           [&](gc::DeviceCommunicator& c) { c.reduce_scatterv(wide, 0, uniform); },
           [&](gc::GroupCoordinator& g) { g.reduce_scatterv(wide, 0, uniform); }},
          {"broadcast",
           [&](ncclComm_t r) {
             api.Broadcast(x.data_ptr(), x.data_ptr(), count, type, 0, r, stream);
           },
           [&](gc::DeviceCommunicator& c) { c.broadcast(x, 0); },
           [&](gc::GroupCoordinator& g) { g.broadcast(x, 0); }},
      };
      if (n == 2) {
        const bool sender = rank == 0;
        cases.push_back({sender ? "send(rank0)" : "recv(rank1)",
                         [&, sender](ncclComm_t r) {
                           if (sender) {
                             api.Send(x.data_ptr(), count, type, 1, r, stream);
                           } else {
                             api.Recv(out_same.data_ptr(), count, type, 0, r, stream);
                           }
                         },
                         [&, sender](gc::DeviceCommunicator& c) {
                           if (sender) {
                             c.send(x, 1);
                           } else {
                             c.recv({e}, size.dtype, 0);
                           }
                         },
                         [&, sender](gc::GroupCoordinator& g) {
                           if (sender) {
                             g.send(x, 1);
                           } else {
                             g.recv({e}, size.dtype, 0);
                           }
                         }});
      }
      for (const Case& c : cases) {
        std::vector<Body> bodies = {[&] { c.raw(raw); }, [&] { c.comm(*comm); }};
        if (raw_split) {
          bodies.push_back([&] { c.raw(raw_split); });
          // What the watchdog's bookkeeping costs where it happens: right after NCCL's launch.
          bodies.push_back([&] {
            c.raw(raw_split);
            cudaStreamCaptureStatus status;
            cudaStreamIsCapturing(stream, &status);
            cudaEventRecord(tracking_event, stream);
          });
          if (with_driver) {
            bodies.push_back([&] {
              c.raw(raw_split);
              CUstreamCaptureStatus status;
              driver.is_capturing(stream, &status);
              driver.record(tracking_event, stream);
            });
          }
          if (write_value) {
            std::uint32_t sequence = 0;
            bodies.push_back([&, sequence]() mutable {
              c.raw(raw_split);
              write_value(stream, marker, ++sequence, 0);
            });
          }
          bodies.push_back([&] {
            gc::cuda::DeviceGuard guard(device);
            tracked->enqueue("bench", stream, [&](const gc::cuda::NcclApi&, ncclComm_t comm) {
              c.raw(comm);
              return ncclSuccess;
            });
          });
        }
        if (coord) bodies.push_back([&] { c.coord(*coord); });
        const bool with_symm = symm && c.symmetric_path && size.dtype == DType::BFloat16;
        if (with_symm) bodies.push_back([&] { c.comm(*symm); });
        if (o.trace) {
          std::fprintf(stderr, "[rank %d] timing %s %s (%zu paths)\n", rank, c.op.c_str(),
                       size.label, bodies.size());
        }
        const std::vector<double> m = time_alternating(bodies, o, stream, *world);
        std::size_t k = 0;
        const double raw_us = m[k++];
        const double comm_us = m[k++];
        const double split_us = raw_split ? m[k++] : -1;
        const double tracked_us = raw_split ? m[k++] : -1;
        const double driver_us = with_driver ? m[k++] : -1;
        const double write_us = write_value ? m[k++] : -1;
        const double nccl_us = tracked ? m[k++] : -1;
        const double coord_us = coord ? m[k++] : -1;
        const double symm_us = with_symm ? m[k++] : -1;
        // The path users take: the coordinator where it runs, else the communicator.
        const double ours = coord ? coord_us : comm_us;
        rows.push_back({c.op, size.label, "raw", raw_us});
        if (raw_split) {
          rows.push_back({c.op, size.label, "raw_split", split_us});
          rows.push_back({c.op, size.label, "raw_split+event", tracked_us});
          if (with_driver) rows.push_back({c.op, size.label, "raw_split+driver", driver_us});
          if (write_value) rows.push_back({c.op, size.label, "raw_split+write", write_us});
          rows.push_back({c.op, size.label, "nccl_enqueue", nccl_us});
        }
        rows.push_back({c.op, size.label, "comm", comm_us});
        if (coord) rows.push_back({c.op, size.label, "coord", coord_us});
        if (with_symm) rows.push_back({c.op, size.label, "symm", symm_us});
        if (print) {
          auto cell = [](double v) {
            static char buf[9][32];
            static int slot = 0;
            char* b = buf[slot++ % 9];
            if (v < 0) {
              std::snprintf(b, 32, "%9s", "-");
            } else {
              std::snprintf(b, 32, "%9.2f", v);
            }
            return b;
          };
          std::printf("%-22s %-10s %9.2f %s %s %s %s %s %s %s %s %+8.2f %9.3f\n", c.op.c_str(),
                      size.label, raw_us, cell(split_us), cell(tracked_us), cell(driver_us),
                      cell(write_us), cell(nccl_us), cell(comm_us), cell(coord_us), cell(symm_us),
                      ours - raw_us, ours / raw_us);
        }
      }
    }
    if (n == 1 && o.profile.empty()) {
      time_sustained(*comm, api, raw, *tracked, device, stream, rows);
      time_graph_replays(o, *comm, api, raw, device, stream, *world, rows);
    }
    if (print && !o.json.empty()) {
      std::ofstream out(o.json);
      out << "{\"world_size\": " << n << ", \"nccl_version\": " << api.version
          << ", \"rounds\": " << o.rounds << ", \"calls\": " << o.calls << ", \"rows\": [";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        out << (i ? ", " : "") << "{\"op\": \"" << rows[i].op << "\", \"size\": \"" << rows[i].size
            << "\", \"path\": \"" << rows[i].path << "\", \"us\": " << rows[i].us << "}";
      }
      out << "]}\n";
    }
    cudaStreamSynchronize(stream);
    if (symm) symm->destroy();
    comm->destroy();
    if (coord) coord->destroy();
    api.CommDestroy(raw);
    if (raw_split) api.CommDestroy(raw_split);
    cudaEventDestroy(tracking_event);
    if (marker) cudaFreeHost(marker);
    if (tracked) tracked->destroy();
    gc::destroy_distributed_environment();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_host_overhead: %s\n", e.what());
    return 1;
  }
  return 0;
}
