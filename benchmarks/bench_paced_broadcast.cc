// One-way latency of broadcast_object when the writer pauses between messages, as an engine's
// scheduler does between steps, through the shared-memory message queue and through the CPU group
// (shared memory, and Gloo), side by side in the same processes and run; what an idle reader
// costs; and the CPU group's all_reduce after a pause (docs/benchmarks/paced_waits.md).
//
//   mpirun -np 2 build/benchmarks/bench_paced_broadcast            # 1 writer, 1 reader
//   mpirun --oversubscribe -np 4 build/benchmarks/bench_paced_broadcast   # 1 writer, 3 readers
//       [--messages N] [--sizes 1K,64K] [--pauses-us 0,50,200,1000,2000,5000,20000]
//       [--idle-s S] [--json PATH]
//
// Paths (all over the whole world, gloo backend, no device communicator):
//   mq    GroupCoordinator(..., use_message_queue_broadcaster=true): the queue
//   shm   a GroupCoordinator without it: broadcast_object over the CPU group, shared memory
//   gloo  the same made with GROUPCOORD_CPU_SHM=0: the CPU group on Gloo's TCP
// For each size and pause, each path in turn sends --messages messages from rank 0: rank 0 sleeps
// the pause, stamps the message with the steady clock (CLOCK_MONOTONIC, one clock for every
// process of the machine) and broadcasts it; a reader's latency is its receive time minus the
// stamp. p50 and p99 are over the messages of every reader; the row shows the slowest reader's.
// The floors: a raw futex wake-up between two threads of rank 0 after each pause (what any
// sleeping wait pays on this machine), rank 0 waking rank 1 over a shared word, and rank 1
// polling that word (a reader already awake). Columns "wr mq" / "wr shm": the writer's own
// broadcast_object call (its stamp to its return), and "a cold core": rank 0 reading 256 KiB right
// after each pause: together they show how much of a reader's latency after a long pause is the
// writer's call running on a core whose caches the pause emptied. Idle: every reader waits
// --idle-s seconds for one message and reports the CPU time its waiting thread used
// (getrusage(RUSAGE_THREAD)) as a share of a core;
// the same readers then spin on sched_yield for as long, the reference. all_reduce after a pause:
// rank 0 sleeps the pause and calls all_reduce (4 B, 1 KiB float32) over a CPU group on shared
// memory, whose other ranks are already waiting in it: rank 0's call time (median of 200) is how
// fast the waiters wake and answer (with a wake-up call when they sleep, none when their paced wait
// has them polling); the waiting ranks' cpu% (the busiest's) is what their waits cost meanwhile.
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "groupcoord/groupcoord.h"
#include "groupcoord/parallel_state.h"

namespace gc = groupcoord;

namespace {

struct Options {
  int messages = 200;
  std::vector<std::size_t> sizes = {1024, 64 * 1024};
  std::vector<long> pauses_us = {0, 50, 200, 1000, 2000, 5000, 20000};
  double idle_s = 3;
  std::string json;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  return parts;
}

std::size_t parse_size(const std::string& text) {
  const char unit = text.empty() ? '\0' : text.back();
  const std::size_t scale = unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
  return static_cast<std::size_t>(std::stoul(scale == 1 ? text : text.substr(0, text.size() - 1))) *
         scale;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--messages")
      o.messages = std::stoi(v);
    else if (a == "--sizes") {
      o.sizes.clear();
      for (const auto& s : split(v)) o.sizes.push_back(parse_size(s));
    } else if (a == "--pauses-us") {
      o.pauses_us.clear();
      for (const auto& s : split(v)) o.pauses_us.push_back(std::stol(s));
    } else if (a == "--idle-s")
      o.idle_s = std::stod(v);
    else if (a == "--json")
      o.json = v;
    else
      throw std::invalid_argument("unknown argument " + a);
  }
  return o;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double thread_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

/// The largest value of every rank (rank 0 gets it; a world all_gather over `control`).
std::vector<double> max_over_ranks(gc::GroupCoordinator& control, const std::vector<double>& mine) {
  gc::Tensor t = gc::Tensor::empty({static_cast<std::int64_t>(mine.size())}, gc::DType::Float64);
  std::copy(mine.begin(), mine.end(), t.data_ptr<double>());
  const gc::Tensor all = control.all_gather(t, 0);
  std::vector<double> out(mine.size(), 0);
  const double* p = all.data_ptr<double>();
  for (int r = 0; r < control.world_size(); ++r) {
    for (std::size_t i = 0; i < mine.size(); ++i) out[i] = std::max(out[i], p[r * mine.size() + i]);
  }
  return out;
}

/// p50 and p99 (µs) of one reader's latencies for `messages` messages on `path`, the reader's CPU
/// time over the run as a share of a core (%): what its waits cost while the writer keeps its
/// pace, and the p50 of the writer's own broadcast_object call (µs: from its stamp to its return;
/// after a long pause the writer's core runs it with cold caches). Zeros where a rank has none.
std::vector<double> paced_run(gc::GroupCoordinator& path, std::size_t bytes, long pause_us,
                              int messages) {
  const bool writer = path.rank_in_group() == 0;
  std::vector<double> latencies;
  gc::Bytes payload(std::max<std::size_t>(bytes, sizeof(std::int64_t)), 'x');
  const double cpu_start = thread_cpu_seconds();
  const std::int64_t wall_start = now_ns();
  for (int m = 0; m < messages; ++m) {
    if (writer) {
      if (pause_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
      const std::int64_t stamp = now_ns();
      std::memcpy(payload.data(), &stamp, sizeof(stamp));
      path.broadcast_object(payload, 0);
      latencies.push_back(static_cast<double>(now_ns() - stamp) / 1e3);
    } else {
      const gc::Bytes got = path.broadcast_object(std::nullopt, 0);
      const std::int64_t received = now_ns();
      std::int64_t stamp = 0;
      std::memcpy(&stamp, got.data(), sizeof(stamp));
      latencies.push_back(static_cast<double>(received - stamp) / 1e3);
    }
  }
  const double wall = static_cast<double>(now_ns() - wall_start) / 1e9;
  if (writer) return {0, 0, 0, percentile(latencies, 0.5)};
  const double cpu = 100.0 * (thread_cpu_seconds() - cpu_start) / wall;
  return {percentile(latencies, 0.5), percentile(latencies, 0.99), cpu, 0};
}

/// p50 (µs) over `messages` rounds of reading one byte per cache line of a 256 KiB buffer (read
/// before, so warm back to back) right after sleeping `pause_us`: how cold the core's caches come
/// back from a pause. On the VM a long pause empties them, and whatever a writer does first after
/// it (its broadcast_object included) runs at that pace.
double cold_core_read_p50(long pause_us, int messages) {
  static std::vector<char> buffer(256 << 10, 1);
  std::vector<double> us;
  long sum = 0;
  for (int m = 0; m < messages; ++m) {
    if (pause_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    const std::int64_t start = now_ns();
    for (std::size_t i = 0; i < buffer.size(); i += 64) sum += buffer[i];
    us.push_back(static_cast<double>(now_ns() - start) / 1e3);
  }
  if (sum == 0) std::printf("#\n");  // keeps the reads
  return percentile(us, 0.5);
}

/// The floor under every sleeping wait: p50 (µs) of a raw futex wake-up between two threads of
/// this process, the waker stamping the clock after sleeping `pause_us`, `messages` times.
double raw_futex_wake_p50(long pause_us, int messages) {
  std::atomic<std::uint32_t> word{0};
  std::atomic<std::int64_t> stamp{0};
  std::vector<double> latencies;
  std::thread waiter([&] {
    for (std::uint32_t m = 1; m <= static_cast<std::uint32_t>(messages); ++m) {
      while (word.load(std::memory_order_acquire) < m) {
        ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, m - 1,
                  nullptr, nullptr, 0);
      }
      latencies.push_back(static_cast<double>(now_ns() - stamp.load()) / 1e3);
    }
  });
  for (int m = 1; m <= messages; ++m) {
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    stamp.store(now_ns());
    word.store(static_cast<std::uint32_t>(m), std::memory_order_release);
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr,
              nullptr, 0);
  }
  waiter.join();
  return percentile(latencies, 0.5);
}

/// The floor as the readers meet it: p50 (µs) of a raw futex wake-up of rank 1 by rank 0 over a
/// shared-memory word, the two processes placed as the launcher placed them (mpirun binds each to
/// its own core, so the sleeper's core is idle and must be woken, which on a VM is the
/// hypervisor waking a halted vCPU). With `poll`, rank 1 polls the word instead of sleeping: the
/// floor of a reader that is already awake when the message comes (what a paced wait aims at),
/// rank 0's own return from its pause and the store's way to the other core. Rank 1's figure;
/// the other ranks return 0.
double cross_process_wake_p50(gc::GroupCoordinator& control, long pause_us, int messages,
                              bool poll) {
  struct Word {
    std::atomic<std::uint32_t> sequence;
    std::atomic<std::int64_t> stamp;
  };
  const int rank = control.rank_in_group();
  std::string name;
  if (rank == 0) name = "/gc-paced-floor-" + std::to_string(::getpid());
  const gc::Bytes shared = control.broadcast_object(
      rank == 0 ? std::optional<gc::Bytes>(gc::Bytes(name)) : std::nullopt, 0);
  name.assign(shared.begin(), shared.end());
  int fd = -1;
  if (rank == 0) {
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ::ftruncate(fd, sizeof(Word)) != 0) std::perror("ftruncate");
  }
  control.barrier();  // created and sized before anyone else opens it
  if (rank != 0) fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  void* mapped = fd >= 0 ? ::mmap(nullptr, sizeof(Word), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                         : MAP_FAILED;
  if (fd >= 0) ::close(fd);
  control.barrier();
  if (rank == 0) ::shm_unlink(name.c_str());
  if (mapped == MAP_FAILED) throw std::runtime_error("the floor's shared word: " + name);
  auto* word = static_cast<Word*>(mapped);
  auto* futex_word = reinterpret_cast<std::uint32_t*>(&word->sequence);
  std::vector<double> latencies;
  for (std::uint32_t m = 1; m <= static_cast<std::uint32_t>(messages); ++m) {
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
      word->stamp.store(now_ns(), std::memory_order_relaxed);
      word->sequence.store(m, std::memory_order_release);
      ::syscall(SYS_futex, futex_word, FUTEX_WAKE, 1, nullptr, nullptr, 0);
    } else if (rank == 1) {
      while (word->sequence.load(std::memory_order_acquire) < m) {
        if (!poll) ::syscall(SYS_futex, futex_word, FUTEX_WAIT, m - 1, nullptr, nullptr, 0);
      }
      latencies.push_back(static_cast<double>(now_ns() - word->stamp.load()) / 1e3);
    }
  }
  ::munmap(mapped, sizeof(Word));
  return latencies.empty() ? 0.0 : percentile(latencies, 0.5);
}

/// Share of a core the waiting thread of each reader used while waiting `seconds` for one
/// message (mq path), then while spinning on sched_yield for as long.
std::vector<double> idle_cost(gc::GroupCoordinator& mq, double seconds) {
  const bool writer = mq.rank_in_group() == 0;
  double waiting = 0, yielding = 0;
  if (writer) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    mq.broadcast_object(gc::Bytes("wake up"), 0);
  } else {
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    mq.broadcast_object(std::nullopt, 0);
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - t0;
    waiting = (thread_cpu_seconds() - cpu0) / wall.count();
    const double cpu1 = thread_cpu_seconds();
    const auto t1 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t1 < std::chrono::duration<double>(seconds)) {
      sched_yield();
    }
    const std::chrono::duration<double> spun = std::chrono::steady_clock::now() - t1;
    yielding = (thread_cpu_seconds() - cpu1) / spun.count();
  }
  return {waiting, yielding};
}

/// Rank 0's time (µs, median of `calls`; 0 on the other ranks) for an all_reduce of `count` floats
/// that it enters `pause_us` after the others, and the other ranks' CPU time of the waiting thread
/// over the calls as a share of a core (%; 0 on rank 0): what their waits cost for that latency.
/// Taken over ranks with max_over_ranks.
std::vector<double> all_reduce_after_pause(gc::GroupCoordinator& group, std::int64_t count,
                                           long pause_us, int calls) {
  gc::Tensor x = gc::Tensor::empty({count}, gc::DType::Float32);
  std::fill(x.data_ptr<float>(), x.data_ptr<float>() + count, 1.0f);
  gc::Tensor out = gc::Tensor::empty({count}, gc::DType::Float32);
  std::vector<double> times;
  const bool pausing = group.rank_in_group() == 0;
  const double cpu_start = thread_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < calls; ++c) {
    if (pausing && pause_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    }
    const auto t0 = std::chrono::steady_clock::now();
    group.all_reduce(x, out);
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
    times.push_back(took.count());
  }
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
  const double cpu = pausing ? 0.0 : 100.0 * (thread_cpu_seconds() - cpu_start) / wall.count();
  return {pausing ? percentile(times, 0.5) : 0.0, cpu};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    gc::init_distributed_environment(-1, -1, "env://", -1, "gloo");
    const int n = gc::get_world_group().world_size();
    std::vector<int> everyone(n);
    for (int r = 0; r < n; ++r) everyone[r] = r;
    const int local = gc::get_world_group().local_rank();
    gc::GroupCoordinator mq({everyone}, local, "gloo", false, true, std::string("paced_mq"));
    gc::GroupCoordinator shm({everyone}, local, "gloo", false, false, std::string("paced_shm"));
    ::setenv("GROUPCOORD_CPU_SHM", "0", 1);  // read when a group is created
    gc::GroupCoordinator gloo({everyone}, local, "gloo", false, false, std::string("paced_gloo"));
    ::unsetenv("GROUPCOORD_CPU_SHM");
    // Barriers and the figures' gather, outside the timed calls.
    gc::GroupCoordinator control({everyone}, local, "gloo", true, false, std::string("control"));
    const bool root = control.rank_in_group() == 0;
    if (root) {
      std::printf(
          "# bench_paced_broadcast: 1 writer, %d reader(s), %u cores, %d messages per row; "
          "queue via mq: %s\n",
          n - 1, std::thread::hardware_concurrency(), o.messages,
          mq.has_mq_broadcaster() ? "yes" : "NO (readers off-node?)");
      std::printf("# one-way latency of broadcast_object (slowest reader), us\n");
      std::printf(
          "# cpu%%: the busiest reader thread's CPU time over the row, as a share of a core (not "
          "counting Gloo's own I/O threads)\n");
      std::printf(
          "# wr mq / wr shm: p50 of the writer's own broadcast_object call (from its stamp to its "
          "return), us\n");
      std::printf("%8s %9s | %9s %9s %6s | %9s %9s %6s | %9s %9s %6s | %8s %8s | %6s %6s\n", "size",
                  "pause_us", "mq p50", "mq p99", "cpu%", "shm p50", "shm p99", "cpu%", "gloo p50",
                  "gloo p99", "cpu%", "gloo/mq", "shm/mq", "wr mq", "wr shm");
    }
    std::ostringstream json;
    json << "{\"ranks\": " << n << ", \"paced\": [";
    bool first = true;
    std::vector<std::pair<const char*, gc::GroupCoordinator*>> paths = {
        {"mq", &mq}, {"shm", &shm}, {"gloo", &gloo}};
    for (std::size_t bytes : o.sizes) {
      for (long pause : o.pauses_us) {
        std::vector<double> row;
        for (auto& [name, group] : paths) {
          control.barrier();
          paced_run(*group, bytes, pause, 3);  // warm-up
          control.barrier();
          for (double v : max_over_ranks(control, paced_run(*group, bytes, pause, o.messages))) {
            row.push_back(v);
          }
        }
        if (root) {
          std::printf(
              "%8zu %9ld | %9.1f %9.1f %6.1f | %9.1f %9.1f %6.1f | %9.1f %9.1f %6.1f | %8.1f "
              "%8.1f | %6.1f %6.1f\n",
              bytes, pause, row[0], row[1], row[2], row[4], row[5], row[6], row[8], row[9], row[10],
              row[8] / row[0], row[4] / row[0], row[3], row[7]);
          std::fflush(stdout);
        }
        json << (first ? "" : ", ") << "{\"bytes\": " << bytes << ", \"pause_us\": " << pause
             << ", \"mq_p50\": " << row[0] << ", \"mq_p99\": " << row[1]
             << ", \"mq_cpu_percent\": " << row[2] << ", \"mq_writer_call_p50\": " << row[3]
             << ", \"shm_p50\": " << row[4] << ", \"shm_p99\": " << row[5]
             << ", \"shm_cpu_percent\": " << row[6] << ", \"shm_writer_call_p50\": " << row[7]
             << ", \"gloo_p50\": " << row[8] << ", \"gloo_p99\": " << row[9]
             << ", \"gloo_cpu_percent\": " << row[10] << ", \"gloo_writer_call_p50\": " << row[11]
             << "}";
        first = false;
      }
    }
    json << "]";
    // Three floors: threads of rank 0 (one core: no cross-core wake-up), rank 0 waking rank 1
    // (the readers' case), and rank 1 polling (a reader already awake).
    std::vector<double> thread_floor, process_floor, poll_floor, cold_read;
    const int floor_messages = std::min(o.messages, 100);
    for (long pause : o.pauses_us) {
      if (pause == 0) continue;
      control.barrier();
      if (root) thread_floor.push_back(raw_futex_wake_p50(pause, floor_messages));
      if (root) cold_read.push_back(cold_core_read_p50(pause, floor_messages));
      control.barrier();
      process_floor.push_back(max_over_ranks(
          control, {cross_process_wake_p50(control, pause, floor_messages, false)})[0]);
      poll_floor.push_back(max_over_ranks(
          control, {cross_process_wake_p50(control, pause, floor_messages, true)})[0]);
    }
    if (root) {
      json << ", \"raw_futex_p50\": {";
      std::printf(
          "# floor: raw futex wake-up after the pause, p50 us (threads of rank 0 | rank 0 "
          "waking rank 1 | rank 1 polling):");
      std::size_t k = 0;
      for (long pause : o.pauses_us) {
        if (pause == 0) continue;
        std::printf(" %ld: %.1f | %.1f | %.1f", pause, thread_floor[k], process_floor[k],
                    poll_floor[k]);
        json << (k ? ", " : "") << "\"" << pause << "\": {\"threads\": " << thread_floor[k]
             << ", \"processes\": " << process_floor[k] << ", \"polling\": " << poll_floor[k]
             << "}";
        ++k;
      }
      json << "}, \"cold_read_256k_p50\": {";
      std::printf(
          "\n# a cold core: reading 256 KiB (one byte per line) right after the pause, "
          "p50 us (back to back: %.1f):",
          cold_core_read_p50(0, floor_messages));
      k = 0;
      for (long pause : o.pauses_us) {
        if (pause == 0) continue;
        std::printf(" %ld: %.1f", pause, cold_read[k]);
        json << (k ? ", " : "") << "\"" << pause << "\": " << cold_read[k];
        ++k;
      }
      json << "}";
      std::printf("\n");
    }
    control.barrier();
    const std::vector<double> idle = max_over_ranks(control, idle_cost(mq, o.idle_s));
    if (root) {
      std::printf(
          "# idle reader, %.1f s waiting for one message: %.2f%% of a core (busiest "
          "reader); sched_yield spin for as long: %.1f%%\n",
          o.idle_s, idle[0] * 100, idle[1] * 100);
    }
    json << ", \"idle_share\": " << idle[0] << ", \"yield_spin_share\": " << idle[1];
    if (root)
      std::printf("# all_reduce (CPU group on shared memory), rank 0 entering after a pause, us\n");
    json << ", \"all_reduce\": [";
    first = true;
    for (std::int64_t count : {std::int64_t{1}, std::int64_t{256}}) {
      control.barrier();
      const std::vector<double> back_to_back =
          max_over_ranks(control, all_reduce_after_pause(control, count, 0, 200));
      control.barrier();
      const std::vector<double> after_pause =
          max_over_ranks(control, all_reduce_after_pause(control, count, 2000, 200));
      if (root) {
        // (No cpu% for the back-to-back calls: a fraction of a millisecond in all, below the
        // resolution of the thread's CPU clock.)
        std::printf(
            "%6lld B: back to back %.2f, after a 2 ms pause %.2f (limit 2x + 15 = %.2f); "
            "waiting ranks' cpu%% %.1f\n",
            static_cast<long long>(count * 4), back_to_back[0], after_pause[0],
            2 * back_to_back[0] + 15, after_pause[1]);
      }
      json << (first ? "" : ", ") << "{\"bytes\": " << count * 4
           << ", \"back_to_back_us\": " << back_to_back[0]
           << ", \"after_2ms_us\": " << after_pause[0]
           << ", \"waiting_cpu_percent_after_2ms\": " << after_pause[1] << "}";
      first = false;
    }
    json << "]}\n";
    if (root && !o.json.empty()) std::ofstream(o.json) << json.str();
    control.barrier();
    control.destroy();
    gloo.destroy();
    shm.destroy();
    mq.destroy();
    gc::destroy_distributed_environment();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_paced_broadcast: %s\n", e.what());
    return 1;
  }
  return 0;
}
