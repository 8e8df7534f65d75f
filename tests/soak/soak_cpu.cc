// Soak of the CPU path (issue "Reliability and security", item 7): `--ops` random operations on
// every rank of the job (the same sequence everywhere, from one seed), each result checked against
// a value computed on the host, and the resident set size sampled every `--sample-every` ops. It
// fails (exit 1 on every rank) on a wrong result, or when a rank's RSS at the end exceeds its RSS
// after the first sample (the warm-up) by more than `--max-growth` (default 5 %).
//
//   mpirun -np 4 build/tests/soak/soak_cpu [--ops 100000] [--seed 1] [--max-count 65536]
//       [--sample-every 10000] [--max-growth 0.05]
//
// Operations: the world group's all_reduce, all_gather, broadcast (rotating root), reduce_scatter
// and all_gatherv with random per-rank counts, a ring of isend/recv, a barrier; the TP
// coordinator's allocating all_reduce of a tensor and broadcast_object of random bytes.
// tools/soak.sh builds and runs it.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "groupcoord/groupcoord.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/world.h"

namespace {

namespace gc = groupcoord;

struct Options {
  long ops = 100000;
  std::uint64_t seed = 1;
  std::size_t max_count = 65536;  ///< elements (int32) per rank and op, at most
  long sample_every = 10000;
  double max_growth = 0.05;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--ops") {
      o.ops = std::atol(v);
    } else if (a == "--seed") {
      o.seed = std::strtoull(v, nullptr, 10);
    } else if (a == "--max-count") {
      o.max_count = std::strtoull(v, nullptr, 10);
    } else if (a == "--sample-every") {
      o.sample_every = std::atol(v);
    } else if (a == "--max-growth") {
      o.max_growth = std::atof(v);
    } else {
      std::fprintf(stderr, "soak_cpu: unknown option %s\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

long rss_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

// Rank r's element j of operation i: small integers, exact in int32 sums.
std::int32_t value(int r, std::size_t j, long i) {
  return static_cast<std::int32_t>((r * 7 + static_cast<long>(j % 13) + i % 5) % 101);
}

// Every rank's operation i: the same on all ranks (one seed); returns false on a wrong result.
bool run_op(long i, std::mt19937_64& rng, const Options& o, gc::ProcessGroup& world,
            gc::GroupCoordinator& tp, std::string* what) {
  const int n = world.size();
  const int me = world.rank();
  const std::size_t count = 1 + rng() % o.max_count;
  std::vector<std::size_t> counts(n);
  for (int r = 0; r < n; ++r) counts[r] = rng() % (o.max_count / n + 1);
  const int kind = static_cast<int>(rng() % 9);
  auto fill = [&](std::size_t c, int r) {
    std::vector<std::int32_t> v(c);
    for (std::size_t j = 0; j < c; ++j) v[j] = value(r, j, i);
    return v;
  };
  auto sum_at = [&](std::size_t j) {
    std::int32_t s = 0;
    for (int r = 0; r < n; ++r) s += value(r, j, i);
    return s;
  };
  switch (kind) {
    case 0: {
      *what = "all_reduce";
      std::vector<std::int32_t> v = fill(count, me);
      world.all_reduce(v.data(), count, gc::DType::Int32);
      for (std::size_t j = 0; j < count; ++j) {
        if (v[j] != sum_at(j)) return false;
      }
      return true;
    }
    case 1: {
      *what = "all_gather";
      std::vector<std::int32_t> mine = fill(count, me), all(count * n);
      world.all_gather(mine.data(), all.data(), count, gc::DType::Int32);
      for (int r = 0; r < n; ++r) {
        for (std::size_t j = 0; j < count; j += 97) {
          if (all[r * count + j] != value(r, j, i)) return false;
        }
      }
      return true;
    }
    case 2: {
      *what = "broadcast";
      const int root = static_cast<int>(i % n);
      std::vector<std::int32_t> v =
          me == root ? fill(count, root) : std::vector<std::int32_t>(count);
      world.broadcast(v.data(), count, gc::DType::Int32, root);
      return v == fill(count, root);
    }
    case 3: {
      *what = "reduce_scatter";
      std::size_t total = 0, offset = 0;
      for (int r = 0; r < n; ++r) {
        if (r < me) offset += counts[r];
        total += counts[r];
      }
      std::vector<std::int32_t> in = fill(total, me), out(counts[me]);
      world.reduce_scatter(in.data(), out.data(), counts, gc::DType::Int32);
      for (std::size_t j = 0; j < counts[me]; ++j) {
        if (out[j] != sum_at(offset + j)) return false;
      }
      return true;
    }
    case 4: {
      *what = "all_gatherv";
      std::size_t total = 0;
      for (std::size_t c : counts) total += c;
      std::vector<std::int32_t> mine = fill(counts[me], me), all(total);
      world.all_gatherv(mine.data(), all.data(), counts, gc::DType::Int32);
      std::size_t at = 0;
      for (int r = 0; r < n; ++r) {
        for (std::size_t j = 0; j < counts[r]; ++j) {
          if (all[at + j] != value(r, j, i)) return false;
        }
        at += counts[r];
      }
      return true;
    }
    case 5: {
      *what = "send/recv ring";
      if (n == 1) return true;
      std::vector<std::int32_t> out = fill(count, me), in(count);
      auto work = world.isend(out.data(), count * sizeof(std::int32_t), (me + 1) % n, 3);
      world.recv(in.data(), count * sizeof(std::int32_t), (me + n - 1) % n, 3);
      work->wait();
      return in == fill(count, (me + n - 1) % n);
    }
    case 6: {
      *what = "barrier";
      world.barrier();
      return true;
    }
    case 7: {
      *what = "coordinator all_reduce";
      gc::Tensor t = gc::Tensor::empty({static_cast<std::int64_t>(count)}, gc::DType::Int32);
      const std::vector<std::int32_t> v = fill(count, me);
      std::copy(v.begin(), v.end(), static_cast<std::int32_t*>(t.data_ptr()));
      const gc::Tensor sum = n == 1 ? t : tp.all_reduce(t);
      const auto* s = static_cast<const std::int32_t*>(sum.data_ptr());
      for (std::size_t j = 0; j < count; j += 31) {
        if (s[j] != sum_at(j)) return false;
      }
      return true;
    }
    default: {
      *what = "broadcast_object";
      const std::string payload(1 + count % 4096, static_cast<char>('a' + i % 26));
      const gc::Bytes got =
          tp.broadcast_object(me == 0 ? std::optional<gc::Bytes>(payload) : std::nullopt, 0);
      return got == payload;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    gc::init_distributed_environment(-1, -1, "env://", -1, "gloo");
    gc::ProcessGroup& world = *gc::world_group();
    const int n = world.size();
    gc::initialize_model_parallel(n, 1, 1, 1, 1, "gloo");
    gc::GroupCoordinator& tp = gc::get_tp_group();
    std::mt19937_64 rng(o.seed);
    long warm_rss = 0;
    bool ok = true;
    std::string what;
    for (long i = 0; i < o.ops && ok; ++i) {
      ok = run_op(i, rng, o, world, tp, &what);
      if (!ok) {
        std::fprintf(stderr, "soak_cpu: rank %d: operation %ld (%s) gave a wrong result\n",
                     world.rank(), i, what.c_str());
        break;
      }
      if ((i + 1) % o.sample_every == 0) {
        const std::int64_t mine = rss_kib();
        std::vector<std::int64_t> all(n);
        world.all_gather(&mine, all.data(), 1, gc::DType::Int64);
        if (warm_rss == 0) warm_rss = mine;
        if (world.rank() == 0) {
          std::printf("soak_cpu: %ld ops, RSS KiB per rank:", i + 1);
          for (std::int64_t r : all) std::printf(" %lld", static_cast<long long>(r));
          std::printf("\n");
          std::fflush(stdout);
        }
      }
    }
    const long end_rss = rss_kib();
    const double growth = warm_rss > 0 ? double(end_rss - warm_rss) / double(warm_rss) : 0.0;
    if (ok && growth > o.max_growth) {
      std::fprintf(stderr, "soak_cpu: rank %d: RSS grew %.1f %% after warm-up (%ld -> %ld KiB)\n",
                   world.rank(), growth * 100, warm_rss, end_rss);
      ok = false;
    }
    std::int32_t all_ok = ok ? 1 : 0;
    world.all_reduce(&all_ok, 1, gc::DType::Int32, gc::ReduceOp::Min);
    if (world.rank() == 0) {
      std::printf("soak_cpu: %ld ops on %d ranks: %s (rank 0 RSS growth after warm-up %.2f %%)\n",
                  o.ops, n, all_ok ? "passed" : "FAILED", growth * 100);
    }
    gc::destroy_distributed_environment();
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak_cpu: %s\n", e.what());
    return 1;
  }
}
