// The main job: a tensor- and pipeline-parallel MLP forward pass run the way an inference engine
// runs one, on groupcoord's parallel_state and GroupCoordinator.
//
//   mpirun -np 4 build/examples/groupcoord_demo     TP=2 x PP=2 (2 ranks: TP=2; 1 rank: no split)
//   mpirun -np 8 build/examples/groupcoord_demo --tp=4 --pp=2 --steps=10
//   build/examples/groupcoord_demo --help
//
// Every step: world rank 0 broadcasts the scheduler's metadata (broadcast_object); pipeline stage 0
// embeds the batch; every stage runs one MLP block — a column-parallel matmul (each TP rank holds a
// column shard of W1) then all_gather along the last dim, tanh, a row-parallel matmul (a row shard
// of W2) then all_reduce, plus the residual; a stage hands its activations and the step id to the
// next with send_tensor_dict / recv_tensor_dict. The last stage checks its output against the whole
// model computed in one process (weights come from a seeded generator, so every rank can). Rank 0
// prints the group layout, PASS or FAIL and the mean time per op; the exit status is 0 only when
// every rank passed.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "groupcoord/group_coordinator.h"
#include "groupcoord/groupcoord.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/tensor_dict.h"

namespace gc = groupcoord;

namespace {

// ---- configuration --------------------------------------------------------------------------

struct Config {
  int tp = 0;  ///< 0: picked from the world size
  int pp = 0;
  int steps = 5;                                ///< timed steps (after one warm-up step)
  int hidden = 64;                              ///< H
  int vocab = 97;                               ///< embedding rows
  int intermediate() const { return 64 * tp; }  ///< I, divisible by TP
};

int parse_flag(const char* arg, const char* name) {
  const std::size_t length = std::strlen(name);
  if (std::strncmp(arg, name, length) != 0) return -1;
  return std::atoi(arg + length);
}

constexpr const char* kUsage =
    "usage: mpirun -np N groupcoord_demo [--tp=T] [--pp=P] [--steps=S]\n"
    "\n"
    "A tensor- and pipeline-parallel MLP forward pass on N processes, the way an inference engine\n"
    "runs one: every step broadcasts the scheduler's metadata (broadcast_object), runs one MLP\n"
    "block per pipeline stage (all_gather, then all_reduce over the TP group) and hands the\n"
    "activations to the next stage (send_tensor_dict / recv_tensor_dict). The last stage checks\n"
    "its output against the whole model computed in one process. Rank 0 prints the groups, the\n"
    "time per op with its payload, and PASS or FAIL (exit status 0 only on PASS).\n"
    "\n"
    "  --tp=T     tensor-parallel size (default: 2 when N is even, else 1)\n"
    "  --pp=P     pipeline-parallel size (default: N / T); T x P must equal N\n"
    "  --steps=S  timed steps after one warm-up step (default 5)\n"
    "Launchers: mpirun, torchrun, srun, or MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE by hand.\n";

/// Parses the arguments; nullopt after printing the usage for --help / -h.
std::optional<Config> parse_args(int argc, char** argv) {
  Config config;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    }
    const int tp = parse_flag(argv[i], "--tp="), pp = parse_flag(argv[i], "--pp=");
    const int steps = parse_flag(argv[i], "--steps=");
    if (tp < 0 && pp < 0 && steps < 0) {
      throw std::invalid_argument(std::string("unknown argument ") + argv[i] +
                                  " (expected --tp=N --pp=N --steps=N; --help explains)");
    }
    if (tp >= 0) config.tp = tp;
    if (pp >= 0) config.pp = pp;
    if (steps >= 0) config.steps = steps;
  }
  return config;
}

// TP=2 x PP=2 at 4 ranks; otherwise two stages when the world splits evenly in at least 4, and
// TP over the rest.
void pick_sizes(Config& config, int world_size) {
  if (config.pp == 0) config.pp = (world_size >= 4 && world_size % 2 == 0) ? 2 : 1;
  if (config.tp == 0) config.tp = world_size / config.pp;
}

// ---- the scheduler's metadata (bytes, as a Python engine would pickle it) -------------------

constexpr int kBatchSize = 8;  ///< tokens per step

struct Schedule {
  int batch_size = 0;
  std::uint64_t seed = 0;
  int step = 0;
};

gc::Bytes encode(const Schedule& s) {
  return "batch_size=" + std::to_string(s.batch_size) + ";seed=" + std::to_string(s.seed) +
         ";step=" + std::to_string(s.step);
}

Schedule decode(const gc::Bytes& bytes) {
  Schedule s;
  unsigned long long seed = 0;
  if (std::sscanf(bytes.c_str(), "batch_size=%d;seed=%llu;step=%d", &s.batch_size, &seed,
                  &s.step) != 3) {
    throw std::runtime_error("bad schedule bytes '" + bytes + "'");
  }
  s.seed = seed;
  return s;
}

// ---- deterministic weights --------------------------------------------------------------------

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), a pure function of (seed, what, layer, row, column).
float uniform(std::uint64_t seed, std::uint64_t what, std::uint64_t layer, std::uint64_t row,
              std::uint64_t column) {
  std::uint64_t h = splitmix64(
      seed ^ splitmix64(what ^ splitmix64(layer ^ splitmix64(row ^ splitmix64(column)))));
  return static_cast<float>(static_cast<double>(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

enum What : std::uint64_t { kEmbedding = 1, kW1 = 2, kW2 = 3, kToken = 4 };

// A rows x columns float32 matrix whose (r, c) element is value(r, c).
template <typename Value>
gc::Tensor make_matrix(std::int64_t rows, std::int64_t columns, Value value) {
  gc::Tensor t = gc::Tensor::empty({rows, columns}, gc::DType::Float32);
  float* data = t.data_ptr<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < columns; ++c) data[r * columns + c] = value(r, c);
  }
  return t;
}

// Columns [first, first + count) of layer `layer`'s W1 (H x I), scaled by 1/sqrt(H).
gc::Tensor w1_columns(const Config& config, std::uint64_t seed, int layer, int first, int count) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(config.hidden));
  return make_matrix(config.hidden, count, [&](std::int64_t r, std::int64_t c) {
    return scale * uniform(seed, kW1, layer, r, first + c);
  });
}

// Rows [first, first + count) of layer `layer`'s W2 (I x H), scaled by 1/sqrt(I).
gc::Tensor w2_rows(const Config& config, std::uint64_t seed, int layer, int first, int count) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(config.intermediate()));
  return make_matrix(count, config.hidden, [&](std::int64_t r, std::int64_t c) {
    return scale * uniform(seed, kW2, layer, first + r, c);
  });
}

// The batch's token ids embedded: B x H.
gc::Tensor embed(const Config& config, const Schedule& s) {
  return make_matrix(s.batch_size, config.hidden, [&](std::int64_t b, std::int64_t h) {
    std::uint64_t token = splitmix64(s.seed ^ splitmix64(kToken ^ splitmix64(s.step * 4096 + b)));
    return uniform(s.seed, kEmbedding, 0, token % config.vocab, h);
  });
}

// ---- tiny CPU kernels -------------------------------------------------------------------------

gc::Tensor matmul(const gc::Tensor& a_in, const gc::Tensor& b_in) {
  gc::Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const std::int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  gc::Tensor out = gc::Tensor::empty({m, n}, gc::DType::Float32);
  const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (std::int64_t p = 0; p < k; ++p) sum += pa[i * k + p] * pb[p * n + j];
      po[i * n + j] = sum;
    }
  }
  return out;
}

void tanh_in_place(gc::Tensor& t) {
  float* data = t.data_ptr<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) data[i] = std::tanh(data[i]);
}

gc::Tensor add(const gc::Tensor& a_in, const gc::Tensor& b_in) {
  gc::Tensor a = a_in.contiguous(), b = b_in.contiguous();
  gc::Tensor out = gc::Tensor::empty(a.shape(), gc::DType::Float32);
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    out.data_ptr<float>()[i] = a.data_ptr<float>()[i] + b.data_ptr<float>()[i];
  }
  return out;
}

// ---- timing -------------------------------------------------------------------------------------

const std::vector<std::string> kOps = {"broadcast_object", "all_gather", "all_reduce",
                                       "send_tensor_dict", "recv_tensor_dict"};

struct OpTimes {
  std::vector<double> total_us = std::vector<double>(kOps.size(), 0.0);
  std::vector<double> calls = std::vector<double>(kOps.size(), 0.0);
  std::vector<double> payload = std::vector<double>(kOps.size(), 0.0);  ///< bytes per call
  bool enabled = false;

  /// Runs `body` (one call of `op` passing `bytes` of payload in) and, once enabled, adds its time.
  template <typename Body>
  auto time(std::size_t op, std::size_t bytes, Body body) -> decltype(body()) {
    auto start = std::chrono::steady_clock::now();
    auto result = body();
    payload[op] = static_cast<double>(bytes);
    if (enabled) {
      total_us[op] +=
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      calls[op] += 1;
    }
    return result;
  }
};
enum Op : std::size_t { kBroadcastObject, kAllGather, kAllReduce, kSendDict, kRecvDict };

// ---- the engine step ----------------------------------------------------------------------------

struct StageWeights {
  gc::Tensor w1;  ///< H x I/TP: this TP rank's columns
  gc::Tensor w2;  ///< I/TP x H: this TP rank's rows
};

StageWeights load_shard(const Config& config, std::uint64_t seed, int stage, int tp_rank) {
  const int shard = config.intermediate() / config.tp;
  return {w1_columns(config, seed, stage, tp_rank * shard, shard),
          w2_rows(config, seed, stage, tp_rank * shard, shard)};
}

// One MLP block across the TP group: x + (tanh(x W1) W2).
gc::Tensor mlp_block(const gc::Tensor& x, const StageWeights& w, gc::GroupCoordinator& tp,
                     OpTimes& times) {
  gc::Tensor local = matmul(x, w.w1);  // B x I/TP
  gc::Tensor full =
      times.time(kAllGather, local.nbytes(), [&] { return tp.all_gather(local, -1); });  // B x I
  tanh_in_place(full);
  const std::int64_t shard = w.w2.size(0);
  gc::Tensor mine = full.narrow(1, tp.rank_in_group() * shard, shard);
  gc::Tensor partial = matmul(mine, w.w2);  // B x H, a partial sum
  gc::Tensor sum = times.time(kAllReduce, partial.nbytes(), [&] { return tp.all_reduce(partial); });
  return add(x, sum);
}

// The whole model in this process: the reference the last stage compares against.
gc::Tensor reference_forward(const Config& config, const Schedule& s) {
  gc::Tensor x = embed(config, s);
  for (int layer = 0; layer < config.pp; ++layer) {
    gc::Tensor h = matmul(x, w1_columns(config, s.seed, layer, 0, config.intermediate()));
    tanh_in_place(h);
    x = add(x, matmul(h, w2_rows(config, s.seed, layer, 0, config.intermediate())));
  }
  return x;
}

int count_mismatches(const gc::Tensor& got, const gc::Tensor& want) {
  if (got.shape() != want.shape()) return 1;
  gc::Tensor g = got.contiguous();
  int bad = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const float a = g.data_ptr<float>()[i], b = want.data_ptr<float>()[i];
    if (!(std::fabs(a - b) <= 1e-4f + 1e-4f * std::fabs(b))) ++bad;
  }
  return bad;
}

// One forward step on this rank; returns the number of problems it found.
int run_step(const Config& config, int step, OpTimes& times) {
  gc::GroupCoordinator& world = gc::get_world_group();
  gc::GroupCoordinator& tp = gc::get_tp_group();
  gc::GroupCoordinator& pp = gc::get_pp_group();

  std::optional<gc::Bytes> decision;
  if (world.rank_in_group() == 0) decision = encode(Schedule{kBatchSize, 20240601, step});
  const Schedule s = decode(times.time(kBroadcastObject, encode(Schedule{}).size(),
                                       [&] { return world.broadcast_object(decision, 0); }));
  int problems = s.step == step ? 0 : 1;

  gc::Tensor x;
  if (pp.is_first_rank()) {
    x = embed(config, s);
  } else {
    gc::TensorDict received = *times.time(kRecvDict, sizeof(float) * s.batch_size * config.hidden,
                                          [&] { return pp.recv_tensor_dict(std::nullopt, &tp); });
    const gc::TensorDictValue* step_id = gc::find_value(received, "step");
    problems += (step_id && std::holds_alternative<gc::Bytes>(*step_id) &&
                 std::get<gc::Bytes>(*step_id) == std::to_string(step))
                    ? 0
                    : 1;
    x = *gc::find_tensor(received, "hidden_states");
  }

  const StageWeights weights = load_shard(config, s.seed, pp.rank_in_group(), tp.rank_in_group());
  x = mlp_block(x, weights, tp, times);

  if (!pp.is_last_rank()) {
    gc::TensorDict outgoing = {{"hidden_states", x}, {"step", gc::Bytes(std::to_string(step))}};
    times.time(kSendDict, x.nbytes(),
               [&] { return pp.send_tensor_dict(outgoing, std::nullopt, &tp); });
  } else {
    const int bad = count_mismatches(x, reference_forward(config, s));
    if (bad != 0)
      std::fprintf(stderr,
                   "[rank %d] step %d: %d output elements differ from the "
                   "reference\n",
                   world.rank(), step, bad);
    problems += bad;
  }
  return problems;
}

// ---- reporting ----------------------------------------------------------------------------------

std::string ranks_text(const std::vector<std::vector<int>>& groups) {
  std::string text;
  for (const auto& group : groups) {
    text += " [";
    for (std::size_t i = 0; i < group.size(); ++i)
      text += (i ? "," : "") + std::to_string(group[i]);
    text += "]";
  }
  return text;
}

void print_layout(const Config& config) {
  std::printf("groupcoord demo: %d ranks, TP=%d x PP=%d, backend %s, %d node(s)\n",
              gc::get_world_group().world_size(), config.tp, config.pp,
              gc::get_world_group().backend().c_str(), gc::get_node_count());
  const std::vector<std::pair<const char*, gc::GroupCoordinator*>> kinds = {
      {"world", &gc::get_world_group()}, {"tp", &gc::get_tp_group()}, {"pp", &gc::get_pp_group()},
      {"dp", &gc::get_dp_group()},       {"ep", &gc::get_ep_group()}, {"dcp", &gc::get_dcp_group()},
      {"pcp", &gc::get_pcp_group()}};
  for (const auto& [name, group] : kinds) {
    std::printf("  %-6s%s\n", name, ranks_text(group->group_ranks()).c_str());
  }
}

// Sums every rank's timings and problem count over the world (Gloo collectives).
void combine(OpTimes& times, int& problems) {
  auto world = gc::get_world_group().cpu_group();
  world->all_reduce(times.total_us.data(), times.total_us.size(), gc::DType::Float64);
  world->all_reduce(times.calls.data(), times.calls.size(), gc::DType::Float64);
  // Payloads are per op, the same on every rank that ran it (0 on the others).
  world->all_reduce(times.payload.data(), times.payload.size(), gc::DType::Float64,
                    gc::ReduceOp::Max);
  std::int32_t total = problems;
  world->all_reduce(&total, 1, gc::DType::Int32);
  problems = total;
}

void print_timings(const OpTimes& times, const Config& config) {
  // Wall time per call on the calling rank, waiting for slower peers included (a stage that
  // receives also waits for the previous stage's compute).
  const int ranks = gc::get_world_group().world_size();
  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("  mean time per op over %d steps, averaged over the ranks that ran it\n",
              config.steps);
  std::printf("  (batch %d x hidden %d float32; payload: bytes each rank passes in per call;\n",
              kBatchSize, config.hidden);
  std::printf("  wall time on the calling rank, waiting for its peers included)\n");
  std::printf("  %-20s %8s %10s %12s\n", "op", "calls", "payload", "us/call");
  for (std::size_t op = 0; op < kOps.size(); ++op) {
    if (times.calls[op] == 0) continue;
    std::printf("  %-20s %8.0f %8.0f B %12.1f\n", kOps[op].c_str(), times.calls[op],
                times.payload[op], times.total_us[op] / times.calls[op]);
  }
  if (gc::get_node_count() == 1 && cores > 0 && static_cast<unsigned>(ranks) > cores) {
    std::printf(
        "  note: %d ranks share %u cores here, so a rank often waits for a peer's time "
        "slice:\n  these times measure the machine's scheduling more than the "
        "library\n",
        ranks, cores);
  }
}

int run(int argc, char** argv, int& rank_out) {
  const std::optional<Config> parsed = parse_args(argc, argv);
  if (!parsed) return 0;  // --help
  Config config = *parsed;
  gc::init_distributed_environment(-1, -1, "env://", -1, "", std::chrono::seconds(60));
  const int world_size = gc::get_world_group().world_size();
  rank_out = gc::get_world_group().rank();
  pick_sizes(config, world_size);
  gc::initialize_model_parallel(config.tp, config.pp);

  OpTimes times;
  int problems = run_step(config, 0, times);  // warm-up: connections, first-touch allocations
  times.enabled = true;
  for (int step = 1; step <= config.steps; ++step) problems += run_step(config, step, times);

  combine(times, problems);
  if (rank_out == 0) {
    print_layout(config);
    print_timings(times, config);
    std::printf("%s\n", problems == 0 ? "PASS" : "FAIL");
    std::fflush(stdout);
  }
  gc::get_world_group().barrier();  // rank 0 hosts the store: everybody is done before teardown
  gc::destroy_model_parallel();
  gc::destroy_distributed_environment();
  return problems == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    return run(argc, argv, rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] demo error: %s\nFAIL\n", rank, e.what());
    return 1;
  }
}
