// CPU collectives in the style of nccl-tests: float32 all_reduce (sum), all_gather and broadcast,
// 4 B .. 64 MiB, on three paths measured in the same processes, in the same run, with rounds
// alternating between the paths:
//
//   groupcoord   the path users take: GroupCoordinator (the TP group over every rank, backend
//                "gloo") .all_reduce(t), .all_gather(t, 0), .broadcast(t, 0) on CPU tensors (the
//                previous result released before each call); and the out= variants of all_reduce
//                and all_gather ("groupcoord(out=)")
//   gloo         Gloo's own algorithms (gloo::allreduce, gloo::allgather, gloo::broadcast) on a
//                separate Gloo context over the same ranks (TCP device on 127.0.0.1, rendezvous
//                through groupcoord's world store)
//   mpi          MPI_Allreduce, MPI_Allgather, MPI_Bcast on MPI_COMM_WORLD
//
//   mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 \
//       build/benchmarks/bench_cpu_collectives [--quick] [--json PATH]
//
// Sizes follow nccl-tests: `size` is the bytes of the result buffer (all_gather: the gathered
// output, each rank contributing size/n; at least one element per rank). Times are per call:
// each round every rank times `calls` back-to-back calls after an MPI barrier, the round's time
// is the slowest rank's, and the figure is the median of the rounds. algbw = size / time;
// busbw = algbw * 2(n-1)/n (all_reduce), (n-1)/n (all_gather), 1 (broadcast).
//
// Correctness: before the warm-up and after the last round each path's result is compared with a
// sequential reference every rank computes for every other rank (small integers, so float32
// sums are exact in any order); 'ok' only when every rank agrees on both checks.
#include <mpi.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "groupcoord/groupcoord.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/prefix_store.h"
#include "groupcoord/world.h"

namespace {

namespace gc = groupcoord;
using Clock = std::chrono::steady_clock;

// ---- options ---------------------------------------------------------------------------------

struct Options {
  std::size_t min_bytes = 4;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t step_factor = 4;
  std::vector<std::string> ops = {"all_reduce", "all_gather", "broadcast"};
  std::vector<std::string> paths = {"groupcoord", "groupcoord_out", "gloo", "mpi"};
  int rounds = 9;
  double target_ms = 20.0;  // time of one round of one path
  int min_calls = 3;
  int warmup = 2;
  std::string json;
};

const char* kUsage =
    "usage: bench_cpu_collectives [--min-bytes N] [--max-bytes N] [--step-factor 2|4]\n"
    "         [--ops all_reduce,all_gather,broadcast] [--paths "
    "groupcoord,groupcoord_out,gloo,mpi]\n"
    "         [--rounds N] [--target-ms MS] [--min-calls N] [--warmup N] [--quick] [--json PATH]\n"
    "  sizes take K, M, G suffixes (powers of 1024); --quick: 5 rounds of ~5 ms, up to 16 MiB\n"
    "  (unless --max-bytes/--rounds/--target-ms say otherwise)\n";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::size_t parse_bytes(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  double scale = 1;
  if (*end == 'K' || *end == 'k')
    scale = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm')
    scale = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    scale = 1024.0 * 1024 * 1024, ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (end == s.c_str() || *end != '\0' || v <= 0) {
    throw std::invalid_argument("bad size '" + s + "'");
  }
  return static_cast<std::size_t>(v * scale);
}

Options parse_options(int argc, char** argv) {
  Options o;
  bool quick = false, max_set = false, rounds_set = false, target_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--min-bytes")
      o.min_bytes = parse_bytes(value());
    else if (a == "--max-bytes")
      o.max_bytes = parse_bytes(value()), max_set = true;
    else if (a == "--step-factor")
      o.step_factor = std::stoul(value());
    else if (a == "--ops")
      o.ops = split(value());
    else if (a == "--paths")
      o.paths = split(value());
    else if (a == "--rounds")
      o.rounds = std::stoi(value()), rounds_set = true;
    else if (a == "--target-ms")
      o.target_ms = std::stod(value()), target_set = true;
    else if (a == "--min-calls")
      o.min_calls = std::stoi(value());
    else if (a == "--warmup")
      o.warmup = std::stoi(value());
    else if (a == "--json")
      o.json = value();
    else if (a == "--quick")
      quick = true;
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown argument '" + a + "'\n" + kUsage);
    }
  }
  if (quick) {
    if (!max_set) o.max_bytes = std::size_t{16} << 20;
    if (!rounds_set) o.rounds = 5;
    if (!target_set) o.target_ms = 5.0;
  }
  for (const auto& op : o.ops) {
    if (op != "all_reduce" && op != "all_gather" && op != "broadcast") {
      throw std::invalid_argument("unknown op '" + op + "'");
    }
  }
  for (const auto& p : o.paths) {
    if (p != "groupcoord" && p != "groupcoord_out" && p != "gloo" && p != "mpi") {
      throw std::invalid_argument("unknown path '" + p + "'");
    }
  }
  if (o.step_factor < 2) throw std::invalid_argument("--step-factor must be >= 2");
  if (o.rounds < 1 || o.min_calls < 1 || o.warmup < 0 || o.target_ms <= 0) {
    throw std::invalid_argument("--rounds, --min-calls must be >= 1, --warmup >= 0");
  }
  if (o.min_bytes > o.max_bytes) throw std::invalid_argument("--min-bytes > --max-bytes");
  return o;
}

// ---- Gloo baseline context -------------------------------------------------------------------

/// gloo::rendezvous::Store over groupcoord's public Store (the world store, under a prefix).
class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<gc::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, gc::Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const gc::Bytes v = store_->get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override {
    store_->wait(keys, store_->timeout());
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<gc::Store> store_;
};

std::shared_ptr<gloo::Context> make_gloo_context(int rank, int size) {
  gloo::transport::tcp::attr attr;
  const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
  if (iface != nullptr && *iface != '\0') {
    attr.iface = iface;
  } else {
    attr.hostname = "127.0.0.1";  // the benchmark runs on one node
  }
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(std::chrono::seconds(300));
  GlooStore store(
      std::make_shared<gc::PrefixStore>("bench_cpu_collectives/gloo", gc::world_store()));
  context->connectFullMesh(store, device);
  return context;
}

// ---- reference values ------------------------------------------------------------------------

/// Element i of rank r's input: small integers, so every float32 sum below is exact.
float value(int rank, std::size_t i, std::size_t size_salt) {
  return static_cast<float>(
      static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 3 + size_salt) % 17) - 8);
}

void fill_input(float* p, std::size_t count, int rank, std::size_t salt) {
  for (std::size_t i = 0; i < count; ++i) p[i] = value(rank, i, salt);
}

/// Sequential reference of the sum of every rank's input at i.
bool check_all_reduce(const float* out, std::size_t count, int n, std::size_t salt) {
  for (std::size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < n; ++r) expected += value(r, i, salt);
    if (out[i] != expected) return false;
  }
  return true;
}

bool check_all_gather(const float* out, std::size_t count_per_rank, int n, std::size_t salt) {
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count_per_rank; ++i) {
      if (out[static_cast<std::size_t>(r) * count_per_rank + i] != value(r, i, salt)) return false;
    }
  }
  return true;
}

bool check_broadcast(const float* out, std::size_t count, std::size_t salt) {
  for (std::size_t i = 0; i < count; ++i) {
    if (out[i] != value(0, i, salt)) return false;
  }
  return true;
}

// ---- other work on the machine -------------------------------------------------------------

/// Busy CPU seconds of the whole machine so far (/proc/stat: user, nice, system, steal; not irq
/// and softirq, which loopback TCP traffic of the ranks themselves may land in).
double machine_busy_s() {
  FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return 0;
  unsigned long long v[10] = {0};
  const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                              &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
  std::fclose(f);
  if (got < 8) return 0;
  const unsigned long long busy = v[0] + v[1] + v[2] + v[7];
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// CPU seconds this process used so far (all its threads).
double own_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/// Measures how many cores other processes kept busy over an interval: the machine's busy time
/// minus every rank's own CPU time, over the wall time (collective: every rank calls both ends).
class ForeignLoad {
 public:
  ForeignLoad() : wall_(Clock::now()), machine_(machine_busy_s()), own_(own_cpu_s()) {}
  /// Cores' worth of other work since construction (0 when /proc/stat is unreadable).
  double cores() const {
    const double own = own_cpu_s() - own_;
    double ours = 0;
    MPI_Allreduce(&own, &ours, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const std::chrono::duration<double> wall = Clock::now() - wall_;
    const double machine = machine_busy_s() - machine_;
    return std::max(0.0, (machine - ours) / std::max(wall.count(), 1e-9));
  }

 private:
  Clock::time_point wall_;
  double machine_;
  double own_;
};

// ---- one (op, size, path) case ---------------------------------------------------------------

struct Buffers {
  gc::Tensor input;   // all_reduce / all_gather input, broadcast buffer
  gc::Tensor output;  // all_reduce / all_gather output (out= variant, gloo, mpi)
  gc::Tensor result;  // the last result of the allocating groupcoord call
};

struct Case {
  std::string path;
  std::function<void()> call;   // one collective
  std::function<bool()> check;  // this rank's verdict on the current result
  std::function<void()> reset;  // prepares the buffers for a check (fresh input, poisoned output)
  int calls = 0;
  std::vector<double> round_s;  // per-call seconds of each round (slowest rank)
  bool ok = true;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

bool all_ranks_true(bool mine) {
  int in = mine ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return out == 1;
}

double slowest(double seconds) {
  double out = 0;
  MPI_Allreduce(&seconds, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

/// Seconds per call of `calls` calls, the slowest rank's. After the barrier one untimed call of
/// the path itself lines the ranks up: a rank that leaves the barrier late (descheduled on a
/// busy or oversubscribed machine) would otherwise add its delay to the first timed call.
double time_calls(Case& c, int calls) {
  MPI_Barrier(MPI_COMM_WORLD);
  c.call();
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i) c.call();
  const std::chrono::duration<double> elapsed = Clock::now() - start;
  return slowest(elapsed.count() / calls);
}

double bus_factor(const std::string& op, int n) {
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather") return static_cast<double>(n - 1) / n;
  return 1.0;
}

struct Row {
  std::string op;
  std::size_t bytes = 0;  // size as nccl-tests counts it
  std::size_t count = 0;  // float32 elements of that size
  std::vector<Case> cases;
  double other_cores = 0;  // cores' worth of other processes' work while this row ran
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string human_bytes(std::size_t b) {
  if (b >= (std::size_t{1} << 20) && b % (std::size_t{1} << 20) == 0) {
    return std::to_string(b >> 20) + "M";
  }
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

std::string path_title(const std::string& p) {
  return p == "groupcoord_out" ? "groupcoord(out=)" : p;
}

/// Runs one (op, size): builds the cases, checks, warms up, calibrates, times alternating rounds.
Row run_size(const Options& o, const std::string& op, std::size_t bytes,
             gc::GroupCoordinator& group, const std::shared_ptr<gloo::Context>& gloo_ctx,
             std::uint32_t& gloo_tag) {
  const int n = group.world_size();
  const int rank = group.rank_in_group();
  std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
  std::size_t per_rank = count;  // elements each rank contributes
  if (op == "all_gather") {
    per_rank = std::max<std::size_t>(1, count / n);
    count = per_rank * n;
  }
  const ForeignLoad load;
  Row row;
  row.op = op;
  row.count = count;
  row.bytes = count * sizeof(float);
  const std::size_t salt = bytes % 17;

  Buffers buf;
  buf.input = gc::Tensor::empty({static_cast<std::int64_t>(op == "broadcast" ? count : per_rank)},
                                gc::DType::Float32);
  if (op != "broadcast") {
    buf.output = gc::Tensor::empty({static_cast<std::int64_t>(count)}, gc::DType::Float32);
  }
  float* in = buf.input.data_ptr<float>();
  float* out = op == "broadcast" ? in : buf.output.data_ptr<float>();
  const std::size_t in_count = op == "broadcast" ? count : per_rank;

  for (const std::string& path : o.paths) {
    if (path == "groupcoord_out" && op == "broadcast") continue;  // broadcast is in place already
    Case c;
    c.path = path;
    // The checked buffer: the allocating groupcoord call returns a fresh tensor.
    const bool fresh = path == "groupcoord" && op != "broadcast";
    c.reset = [&, in, out, in_count, count, rank, salt] {
      if (op == "broadcast") {
        if (rank == 0) {
          fill_input(in, count, 0, salt);
        } else {
          std::fill(in, in + count, std::nanf(""));
        }
      } else {
        fill_input(in, in_count, rank, salt);
        std::fill(out, out + count, std::nanf(""));
        buf.result = gc::Tensor();
      }
    };
    c.check = [&, fresh, out, count, per_rank, n, salt] {
      const float* r = out;
      if (fresh) {
        if (!buf.result.defined() || static_cast<std::size_t>(buf.result.numel()) != count) {
          return false;
        }
        r = buf.result.data_ptr<float>();
      }
      if (op == "all_reduce") return check_all_reduce(r, count, n, salt);
      if (op == "all_gather") return check_all_gather(r, per_rank, n, salt);
      return check_broadcast(r, count, salt);
    };
    if (path == "groupcoord") {
      // The previous result is released before the call, as in a layer loop where each result is
      // consumed before the next collective: the new result then reuses its cached block. Held
      // across the call, two blocks alternate and the larger working set cost up to 24 % at 4 MiB
      // on the development VM (docs/benchmarks/cpu_collectives.md, session 14), a cost of the
      // caller's pattern that MPI's single output buffer does not pay.
      if (op == "all_reduce") {
        c.call = [&] {
          buf.result = gc::Tensor();
          buf.result = group.all_reduce(buf.input);
        };
      } else if (op == "all_gather") {
        c.call = [&] {
          buf.result = gc::Tensor();
          buf.result = group.all_gather(buf.input, 0);
        };
      } else {
        c.call = [&] { group.broadcast(buf.input, 0); };
      }
    } else if (path == "groupcoord_out") {
      if (op == "all_reduce")
        c.call = [&] { group.all_reduce(buf.input, buf.output); };
      else
        c.call = [&] { group.all_gather(buf.input, 0, buf.output); };
    } else if (path == "gloo") {
      if (op == "all_reduce") {
        c.call = [&, in, out, count] {
          gloo::AllreduceOptions opts(gloo_ctx);
          opts.setInput(in, count);
          opts.setOutput(out, count);
          opts.setReduceFunction(
              static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          opts.setTag(gloo_tag++);
          gloo::allreduce(opts);
        };
      } else if (op == "all_gather") {
        c.call = [&, in, out, per_rank, count] {
          gloo::AllgatherOptions opts(gloo_ctx);
          opts.setInput(in, per_rank);
          opts.setOutput(out, count);
          opts.setTag(gloo_tag++);
          gloo::allgather(opts);
        };
      } else {
        c.call = [&, in, count] {
          gloo::BroadcastOptions opts(gloo_ctx);
          opts.setOutput(in, count);
          opts.setRoot(0);
          opts.setTag(gloo_tag++);
          gloo::broadcast(opts);
        };
      }
    } else {  // mpi
      const int icount = static_cast<int>(count), iper = static_cast<int>(per_rank);
      if (op == "all_reduce") {
        c.call = [in, out, icount] {
          MPI_Allreduce(in, out, icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        };
      } else if (op == "all_gather") {
        c.call = [in, out, iper] {
          MPI_Allgather(in, iper, MPI_FLOAT, out, iper, MPI_FLOAT, MPI_COMM_WORLD);
        };
      } else {
        c.call = [in, icount] { MPI_Bcast(in, icount, MPI_FLOAT, 0, MPI_COMM_WORLD); };
      }
    }
    row.cases.push_back(std::move(c));
  }

  // Check, warm up, calibrate: one path at a time (buffers are shared between the paths).
  for (Case& c : row.cases) {
    c.reset();
    c.call();
    c.ok = all_ranks_true(c.check());
    for (int i = 0; i < o.warmup; ++i) c.call();
    double per_call = time_calls(c, 1);
    for (int i = 0; i < 2; ++i) per_call = std::min(per_call, time_calls(c, 1));
    const double want = o.target_ms * 1e-3 / std::max(per_call, 1e-9);
    c.calls = static_cast<int>(std::min(100000.0, std::max<double>(o.min_calls, std::ceil(want))));
  }
  // Timed rounds, alternating the paths; the starting path rotates every round.
  const std::size_t k = row.cases.size();
  for (int r = 0; r < o.rounds; ++r) {
    for (std::size_t j = 0; j < k; ++j) {
      Case& c = row.cases[(j + static_cast<std::size_t>(r)) % k];
      c.round_s.push_back(time_calls(c, c.calls));
    }
  }
  // The last timed call's result must still be right (the inputs never change).
  for (Case& c : row.cases) {
    c.reset();
    c.call();
    c.ok = all_ranks_true(c.check()) && c.ok;
  }
  row.other_cores = load.cores();
  return row;
}

// ---- output ----------------------------------------------------------------------------------

const Case* find_case(const Row& row, const std::string& path) {
  for (const Case& c : row.cases) {
    if (c.path == path) return &c;
  }
  return nullptr;
}

void print_header(const std::string& op, const std::vector<std::string>& paths, int n,
                  const Options& o) {
  std::printf(
      "\n# %s%s, float32, %d ranks; time = median over %d rounds of the per-call time "
      "(slowest rank), us; algbw/busbw GB/s\n",
      op.c_str(), op == "all_reduce" ? " (sum)" : "", n, o.rounds);
  std::printf("# %10s %10s", "", "");
  for (const auto& p : paths) {
    if (p == "groupcoord_out" && op == "broadcast") continue;
    std::printf(" | %-33s", path_title(p).c_str());
  }
  std::printf(" |\n# %10s %10s", "size", "count");
  for (const auto& p : paths) {
    if (p == "groupcoord_out" && op == "broadcast") continue;
    std::printf(" | %10s %7s %7s %5s", "time", "algbw", "busbw", "check");
  }
  std::printf(" | %8s %9s %6s\n", "ours/MPI", "Gloo/ours", "other");
}

void print_row(const Row& row, int n) {
  std::printf("  %10s %10zu", human_bytes(row.bytes).c_str(), row.count);
  for (const Case& c : row.cases) {
    const double t = median(c.round_s);
    const double algbw = row.bytes / t / 1e9;
    std::printf(" | %10.2f %7.3f %7.3f %5s", t * 1e6, algbw, algbw * bus_factor(row.op, n),
                c.ok ? "ok" : "WRONG");
  }
  const Case* ours = find_case(row, "groupcoord");
  const Case* mpi = find_case(row, "mpi");
  const Case* gloo = find_case(row, "gloo");
  const std::string r1 = ours && mpi ? fmt("%8.2f", median(ours->round_s) / median(mpi->round_s))
                                     : std::string("     n/a");
  const std::string r2 = ours && gloo ? fmt("%9.2f", median(gloo->round_s) / median(ours->round_s))
                                      : std::string("      n/a");
  std::printf(" | %s %s %6.2f\n", r1.c_str(), r2.c_str(), row.other_cores);
  std::fflush(stdout);
}

/// "1.23 1.10 0.98": the 1, 5 and 15 minute load averages (other work on the machine skews
/// every figure, the Gloo paths' thread hand-offs most).
std::string load_average() {
  double l[3] = {0, 0, 0};
  if (getloadavg(l, 3) != 3) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", l[0], l[1], l[2]);
  return buf;
}

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

void write_json(const std::string& path, const Options& o, const std::vector<Row>& rows, int n,
                double total_s, const std::string& load_before) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const char* shm = std::getenv("GROUPCOORD_CPU_SHM");
  std::fprintf(f, "{\n  \"benchmark\": \"bench_cpu_collectives\",\n  \"dtype\": \"float32\",\n");
  std::fprintf(f, "  \"world_size\": %d,\n  \"host\": %s,\n  \"date\": %s,\n", n,
               json_str(host).c_str(), json_str(date).c_str());
  std::fprintf(f, "  \"cores\": %ld,\n", sysconf(_SC_NPROCESSORS_ONLN));
  std::fprintf(f, "  \"GROUPCOORD_CPU_SHM\": %s,\n", shm ? json_str(shm).c_str() : "null");
  std::fprintf(f, "  \"rounds\": %d,\n  \"target_ms\": %g,\n  \"min_calls\": %d,\n", o.rounds,
               o.target_ms, o.min_calls);
  std::fprintf(f, "  \"load_before\": %s,\n  \"load_after\": %s,\n", json_str(load_before).c_str(),
               json_str(load_average()).c_str());
  std::fprintf(f, "  \"total_s\": %.3f,\n  \"results\": [", total_s);
  bool first = true;
  for (const Row& row : rows) {
    for (const Case& c : row.cases) {
      const double t = median(c.round_s);
      const double algbw = row.bytes / t / 1e9;
      std::fprintf(f, "%s\n    {\"op\": %s, \"path\": %s, \"bytes\": %zu, \"count\": %zu, ",
                   first ? "" : ",", json_str(row.op).c_str(), json_str(c.path).c_str(), row.bytes,
                   row.count);
      std::fprintf(f, "\"time_us\": %.4f, \"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, ", t * 1e6,
                   algbw, algbw * bus_factor(row.op, n));
      std::fprintf(f, "\"ok\": %s, \"calls_per_round\": %d, \"other_cores\": %.3f, ",
                   c.ok ? "true" : "false", c.calls, row.other_cores);
      std::fprintf(f, "\"rounds_us\": [");
      for (std::size_t i = 0; i < c.round_s.size(); ++i) {
        std::fprintf(f, "%s%.4f", i ? ", " : "", c.round_s[i] * 1e6);
      }
      std::fprintf(f, "]}");
      first = false;
    }
  }
  std::fprintf(f, "\n  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    const Options o = parse_options(argc, argv);
    const auto t0 = Clock::now();
    // Host memory over Gloo, also on hosts with GPUs (where the default backend is nccl).
    gc::init_distributed_environment(-1, -1, "env://", -1, "gloo");
    const int world_size = gc::get_world_group().world_size();
    gc::initialize_model_parallel(world_size, 1, 1, 1, 1, "gloo");
    gc::GroupCoordinator& group = gc::get_tp_group();
    int mpi_size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    if (mpi_size != world_size || group.world_size() != world_size) {
      throw std::runtime_error("MPI_COMM_WORLD has " + std::to_string(mpi_size) +
                               " ranks, groupcoord's world " + std::to_string(world_size));
    }
    int mpi_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    if (mpi_rank != group.rank_in_group()) {
      throw std::runtime_error("MPI rank and groupcoord rank differ");
    }
    const bool want_gloo = std::find(o.paths.begin(), o.paths.end(), "gloo") != o.paths.end();
    std::shared_ptr<gloo::Context> gloo_ctx;
    if (want_gloo) gloo_ctx = make_gloo_context(group.rank_in_group(), world_size);
    std::uint32_t gloo_tag = 0;
    const bool root = group.rank_in_group() == 0;
    const std::string load_before = load_average();
    if (root) {
      std::printf(
          "# bench_cpu_collectives: %d ranks, %ld cores, rounds %d, ~%g ms per round per "
          "path (at least %d calls), warm-up %d calls; GROUPCOORD_CPU_SHM=%s\n",
          world_size, sysconf(_SC_NPROCESSORS_ONLN), o.rounds, o.target_ms, o.min_calls, o.warmup,
          std::getenv("GROUPCOORD_CPU_SHM") ? std::getenv("GROUPCOORD_CPU_SHM") : "(unset)");
      std::printf("# load average before: %s\n", load_before.c_str());
      std::printf(
          "# ratios: ours/MPI = groupcoord time / MPI time; Gloo/ours = raw Gloo time / "
          "groupcoord time (the allocating groupcoord call); other = cores kept busy by "
          "other processes while the row ran (anything above ~0.1 skews it)\n");
    }
    std::vector<Row> rows;
    for (const std::string& op : o.ops) {
      if (root) print_header(op, o.paths, world_size, o);
      std::size_t last = 0;  // all_gather rounds small sizes up to one element per rank
      for (std::size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) {
        const std::size_t per_rank = std::max<std::size_t>(1, bytes / sizeof(float) / world_size);
        const std::size_t effective =
            op == "all_gather" ? per_rank * world_size * sizeof(float) : bytes;
        if (effective == last) continue;
        last = effective;
        rows.push_back(run_size(o, op, bytes, group, gloo_ctx, gloo_tag));
        if (root) print_row(rows.back(), world_size);
      }
    }
    const std::chrono::duration<double> total = Clock::now() - t0;
    if (root) {
      std::printf("# total %.1f s; load average after: %s\n", total.count(),
                  load_average().c_str());
      if (!o.json.empty()) {
        write_json(o.json, o, rows, world_size, total.count(), load_before);
        std::printf("# wrote %s\n", o.json.c_str());
      }
    }
    bool all_ok = true;
    for (const Row& row : rows) {
      for (const Case& c : row.cases) all_ok = all_ok && c.ok;
    }
    if (!all_ok) status = 2;
    MPI_Barrier(MPI_COMM_WORLD);
    gloo_ctx.reset();
    gc::get_world_group().barrier();
    gc::destroy_model_parallel();
    gc::destroy_distributed_environment();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cpu_collectives: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  MPI_Finalize();
  return status;
}
