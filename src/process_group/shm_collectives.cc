#include "process_group/shm_collectives.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>
#include <vector>

#include "core/cross_memory.h"
#include "core/deadline.h"
#include "core/env_switch.h"
#include "core/host_copy.h"
#include "core/shared_memory.h"
#include "core/wake_word.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/half.h"
#include "groupcoord/logging.h"
#include "process_group/group_health.h"
#include "process_group/rank_liveness.h"
#include "process_group/reduce_functions.h"

namespace groupcoord {

namespace {

using Counter = std::atomic<std::uint64_t>;
static_assert(Counter::is_always_lock_free,
              "shared-memory counters need lock-free (address-free) atomics");

constexpr std::size_t kLine = 64;

// A rank's cache line of the header: its step counter, and what peers need to read its memory
// directly (written at set-up).
struct RankLine {
  Counter step;
  std::uint64_t pid;
  std::uint64_t probe;   // address of cross_memory_probe() in that process
  std::uint64_t pid_ns;  // its pid namespace and start time: a waiter can tell that it died
  std::uint64_t start;
};
static_assert(sizeof(RankLine) <= kLine, "a rank's header fits one cache line");

// Rank r's line of the header of `segment`.
RankLine& rank_line(const shm::SharedMemory& segment, int r) {
  return *reinterpret_cast<RankLine*>(static_cast<std::uint8_t*>(segment.data()) +
                                      static_cast<std::size_t>(r) * kLine);
}

// What a rank publishes in its slot for a single-copy step: where its buffer is.
struct BufferAddress {
  std::uint64_t address;
  std::uint64_t bytes;
};
// ShmCollectives::given_up(): the rank that gave up (plus one) in the low 32 bits, and why.
constexpr std::uint64_t kGaveUpAtDeadline = std::uint64_t{1} << 32;
constexpr std::uint64_t kGaveUpOnFailure = std::uint64_t{2} << 32;
// What a single-copy collective says when a peer gave up while it read the peer's buffers.
constexpr const char* kReadMayBeInvalid =
    "while this rank read its buffers, which it may have freed: the result is not valid";
// A direct-all_reduce size (KiB) that means "never".
constexpr std::int32_t kNeverKib = std::numeric_limits<std::int32_t>::max();
// Room for the segment's name in the set-up broadcast.
constexpr std::size_t kNameBytes = 96;

// The rank lines, the wake word every waiting rank sleeps on (core/wake_word.h), then the line
// of the word a rank sets when it gives up on the group (ShmCollectives::give_up).
std::size_t header_bytes(int size) { return static_cast<std::size_t>(size + 2) * kLine; }

// out[i] = sum over parts of parts[p][i], accumulated in float and rounded once (fp16, bf16,
// fp8): the same result on every rank, and closer to the exact sum than rounding per pair.
template <typename Bits, float (*ToFloat)(Bits), Bits (*FromFloat)(float)>
void sum_through_float(void* out, const std::vector<const void*>& parts, std::size_t n) {
  auto* o = static_cast<Bits*>(out);
  for (std::size_t i = 0; i < n; ++i) {
    float acc = ToFloat(static_cast<const Bits*>(parts[0])[i]);
    for (std::size_t p = 1; p < parts.size(); ++p)
      acc += ToFloat(static_cast<const Bits*>(parts[p])[i]);
    o[i] = FromFloat(acc);
  }
}

using NarrowSum = void (*)(void* out, const std::vector<const void*>& parts, std::size_t n);

// The float-accumulating sum for a narrow floating type, else nullptr.
NarrowSum narrow_sum(DType dtype, ReduceOp op) {
  if (op != ReduceOp::Sum) return nullptr;  // min / max copy bits: nothing to round
  switch (dtype) {
    case DType::Float16:
      return &sum_through_float<std::uint16_t, &half_to_float, &float_to_half>;
    case DType::BFloat16:
      return &sum_through_float<std::uint16_t, &bfloat16_to_float, &float_to_bfloat16>;
    case DType::Float8E4M3:
      return &sum_through_float<std::uint8_t, &float8_e4m3fn_to_float, &float_to_float8_e4m3fn>;
    case DType::Float8E5M2:
      return &sum_through_float<std::uint8_t, &float8_e5m2_to_float, &float_to_float8_e5m2>;
    default:
      return nullptr;
  }
}

// False when the environment variable `name` is "0" in this process.
// False when GROUPCOORD_CPU_SHM=0 switches the transport off for this process.
bool enabled_here() { return env_switch_on("GROUPCOORD_CPU_SHM"); }

// This rank's wish for the size (KiB) from which all_reduce reads the peers' memory directly:
// GROUPCOORD_CPU_DIRECT_ALL_REDUCE_KIB when set (0: never, whatever the others wish), else
// kSingleCopyReduceBytes for groups of 2 and kNeverKib (not by default) for larger ones. The direct
// path was measured faster at 2 ranks and slower at 4 ranks sharing 2 cores
// (docs/benchmarks/cpu_collectives.md).
std::int32_t direct_all_reduce_kib(int size, const std::string& label) {
  const std::int32_t fallback =
      size == 2 ? static_cast<std::int32_t>(ShmCollectives::kSingleCopyReduceBytes >> 10)
                : kNeverKib;
  const char* value = std::getenv("GROUPCOORD_CPU_DIRECT_ALL_REDUCE_KIB");
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long kib = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || kib < 0 || kib > kNeverKib) {
    GC_LOG(Warn, label, ": GROUPCOORD_CPU_DIRECT_ALL_REDUCE_KIB=", value,
           " is not a size in KiB (0 or more); the default is used");
    return fallback;
  }
  return static_cast<std::int32_t>(kib);
}

}  // namespace

std::size_t ShmCollectives::segment_bytes(int size) {
  return header_bytes(size) + 2 * static_cast<std::size_t>(size) * kChunkBytes +
         kEagerSlots * kEagerBytes;
}

std::unique_ptr<ShmCollectives> ShmCollectives::create(int rank, int size,
                                                       const std::string& group_name,
                                                       std::shared_ptr<GroupHealth> health,
                                                       std::chrono::milliseconds timeout,
                                                       const SetupChannel& channel) {
  if (size < 2) return nullptr;
  // Rank 0 creates and names the segment ("" when it cannot or will not).
  char name[kNameBytes] = {};
  std::unique_ptr<shm::SharedMemory> segment;
  if (rank == 0 && enabled_here()) {
    try {
      const std::string created = shm::unique_segment_name("/gccpu");  // unlinked at set-up
      segment = shm::SharedMemory::create(created, segment_bytes(size));
      std::strncpy(name, created.c_str(), kNameBytes - 1);
    } catch (const std::exception& e) {
      GC_LOG(Warn, health->label(), ": no shared memory for the CPU collectives (", e.what(),
             "); they use Gloo");
    }
  }
  channel.broadcast(name, kNameBytes, 0);
  bool ready = name[0] != '\0' && enabled_here();
  if (ready && rank != 0) {
    shm::SharedMemory::OpenResult opened = shm::SharedMemory::open(name, segment_bytes(size));
    segment = std::move(opened.segment);
    ready = segment != nullptr;  // not found: another node
  }
  if (ready) {
    RankLine* line = &rank_line(*segment, rank);
    line->pid = static_cast<std::uint64_t>(::getpid());
    line->probe = reinterpret_cast<std::uint64_t>(shm::cross_memory_probe());
    line->pid_ns = this_pid_namespace();
    line->start = this_start_time();
  }
  // Every rank has mapped it (or given up) once this returns: the name can go.
  const bool everyone = channel.all_reduce_min(ready ? 1 : 0) == 1;
  if (segment) segment->unlink();
  if (!everyone) return nullptr;
  // Single copy for large messages: every rank must be able to read the next one's memory.
  const RankLine* next = &rank_line(*segment, (rank + 1) % size);
  std::uint64_t probe = 0;
  const bool reachable =
      env_switch_on("GROUPCOORD_CPU_SINGLE_COPY") &&
      shm::read_peer_memory(static_cast<pid_t>(next->pid),
                            reinterpret_cast<const void*>(next->probe), &probe, sizeof(probe)) &&
      probe == shm::kCrossMemoryProbe;
  const bool single_copy = channel.all_reduce_min(reachable ? 1 : 0) == 1;
  // Every rank must take the same path for the same message: one rank's 0 turns it off for the
  // group, else the smallest wish wins.
  const std::int32_t wish = direct_all_reduce_kib(size, health->label());
  const bool switched_off = channel.all_reduce_min(wish == 0 ? 0 : 1) == 0;
  const std::int32_t direct_kib = channel.all_reduce_min(wish == 0 ? kNeverKib : wish);
  const std::size_t direct_bytes = !single_copy || switched_off || direct_kib == kNeverKib
                                       ? std::numeric_limits<std::size_t>::max()
                                       : static_cast<std::size_t>(direct_kib) << 10;
  GC_LOG(Debug, health->label(), ": CPU collectives through shared memory (", group_name,
         single_copy ? ", single copy for large messages)" : ")");
  return std::unique_ptr<ShmCollectives>(new ShmCollectives(
      rank, size, std::move(health), timeout, std::move(segment), single_copy, direct_bytes));
}

ShmCollectives::ShmCollectives(int rank, int size, std::shared_ptr<GroupHealth> health,
                               std::chrono::milliseconds timeout,
                               std::unique_ptr<shm::SharedMemory> segment, bool single_copy,
                               std::size_t direct_all_reduce_bytes)
    : rank_(rank),
      size_(size),
      health_(std::move(health)),
      timeout_(timeout),
      segment_(std::move(segment)),
      single_copy_(single_copy),
      direct_all_reduce_bytes_(direct_all_reduce_bytes) {}

ShmCollectives::~ShmCollectives() = default;

std::uint8_t* ShmCollectives::slot(int bank, int r) const {
  auto* base = static_cast<std::uint8_t*>(segment_->data()) + header_bytes(size_);
  return base + (static_cast<std::size_t>(bank) * size_ + r) * kChunkBytes;
}

std::uint8_t* ShmCollectives::eager_slot(std::uint64_t step) const {
  return slot(2, 0) + (step % kEagerSlots) * kEagerBytes;  // right after the two banks
}

int ShmCollectives::begin_step(const char* op) {
  // Writing this rank's slot of the bank of step_ + 1 is safe once every rank has finished
  // reading step_ - 1 (the bank's last use), which it shows by publishing step_. After a full
  // finish_step that is known; after a step that waited for fewer ranks it may not be yet.
  if (everyone_reached_ < step_) {
    wait_until(op, step_, kEveryRank);
    everyone_reached_ = step_;
  }
  return static_cast<int>((step_ + 1) % 2);
}

std::uint64_t ShmCollectives::slowest_step() const {
  std::uint64_t slowest = step_;
  for (int r = 0; r < size_; ++r) {
    slowest = std::min(slowest, rank_line(*segment_, r).step.load(std::memory_order_acquire));
  }
  return slowest;
}

void ShmCollectives::finish_step(const char* op) {
  publish_step();
  wait_until(op, step_, kEveryRank);
  everyone_reached_ = step_;
}

void ShmCollectives::publish_step() {
  rank_line(*segment_, rank_).step.store(++step_, std::memory_order_release);
  shm::notify_waiters(wake_word());
}

shm::WakeWord& ShmCollectives::wake_word() const {
  return *reinterpret_cast<shm::WakeWord*>(static_cast<std::uint8_t*>(segment_->data()) +
                                           static_cast<std::size_t>(size_) * kLine);
}

std::uint32_t ShmCollectives::wake_ups() const {
  // notify_waiters bumps the sequence only when it found a sleeper, just before its FUTEX_WAKE.
  return wake_word().sequence.load(std::memory_order_relaxed);
}

Counter& ShmCollectives::given_up() const {
  return *reinterpret_cast<Counter*>(static_cast<std::uint8_t*>(segment_->data()) +
                                     static_cast<std::size_t>(size_ + 1) * kLine);
}

void ShmCollectives::give_up(const std::string& reason, bool timed_out) {
  // Before anything of this rank's is freed: a peer still reading its buffers sees it afterwards.
  // The first rank to give up is the one named.
  std::uint64_t none = 0;
  const std::uint64_t mine =
      (timed_out ? kGaveUpAtDeadline : kGaveUpOnFailure) | (static_cast<std::uint64_t>(rank_) + 1);
  given_up().compare_exchange_strong(none, mine, std::memory_order_release);
  shm::notify_waiters(wake_word());
  health_->mark_broken(reason);
}

void ShmCollectives::throw_if_a_rank_gave_up(const char* op, const char* what) {
  const std::uint64_t word = given_up().load(std::memory_order_acquire);
  if (word == 0) return;
  const bool timed_out = (word & kGaveUpAtDeadline) != 0;
  const std::string reason =
      std::string(op) + ": rank " + std::to_string(static_cast<int>(word & 0xffffffffu) - 1) +
      " gave up on the group (" +
      (timed_out ? "its wait for a peer reached the group's timeout" : "a failure there") + ") " +
      what;
  health_->mark_broken(reason);
  // The same kind of error as that rank's: an absent peer is a timeout for everyone.
  if (timed_out) GC_THROW(TimeoutError, health_->label(), ": ", reason);
  GC_THROW(DistributedError, health_->label(), ": ", reason);
}

void ShmCollectives::wait_until(const char* op, std::uint64_t step, int only) {
  auto behind = [&](int r) {
    return rank_line(*segment_, r).step.load(std::memory_order_acquire) < step;
  };
  auto there = [&] {
    if (only != kEveryRank) return !behind(only);
    for (int r = 0; r < size_; ++r) {
      if (behind(r)) return false;
    }
    return true;
  };
  // A rank that gave up will not come (and may have left steps that look complete behind): one
  // load of a line nobody writes while all is well.
  throw_if_a_rank_gave_up(op, "before this rank's step");
  if (there()) return;  // the common case on a quiet machine: no clock, no system call
  const shm::Deadline deadline(timeout_);
  auto next_liveness_check = std::chrono::steady_clock::now() + kDeadPeerCheckInterval;
  std::uint32_t polls = 0;
  auto missing = [&] {
    std::ostringstream ranks;
    for (int r = 0; r < size_; ++r) {
      if ((only == kEveryRank || r == only) && behind(r)) ranks << " " << r;
    }
    return ranks.str();
  };
  auto ready = [&] {
    if (there()) return true;
    // Destroyed or broken by another thread (an abort, a failure elsewhere): say why.
    if (health_->is_destroyed() || health_->is_broken()) health_->check_usable(op);
    // A rank that gave up will not come: no need to wait for the deadline.
    if (given_up().load(std::memory_order_relaxed) != 0) {
      throw_if_a_rank_gave_up(op, ("while this rank waited for rank(s)" + missing() +
                                   " (shared-memory step " + std::to_string(step) + ")")
                                      .c_str());
    }
    // Nor will a rank whose process is gone (a /proc lookup, so only now and then; the clock is
    // read every 64th poll, so that the spinning start of a wait stays as quick as it was).
    if (++polls % 64 == 0 && std::chrono::steady_clock::now() >= next_liveness_check) {
      next_liveness_check = std::chrono::steady_clock::now() + kDeadPeerCheckInterval;
      throw_if_a_missing_rank_died(op, step, only);
    }
    return false;
  };
  // Paced (the header): with no long waits of regular length behind it, this is the plain wait;
  // with them it sleeps until shortly before the next is due, then polls (checking `ready`, so a
  // rank that gave up and the group's state are seen there too, and the thread's interrupt).
  if (shm::wait_on(wake_word(), ready, deadline, {}, std::chrono::seconds(60), shm::WaitTuning(),
                   &pacing_)) {
    return;
  }
  const std::string reason =
      std::string(op) + ": rank(s)" + missing() + " did not arrive within the group's timeout of " +
      std::to_string(timeout_.count()) + " ms (shared-memory step " + std::to_string(step) + ")";
  give_up(reason, /*timed_out=*/true);
  GC_THROW(TimeoutError, health_->label(), ": ", reason);
}

void ShmCollectives::throw_if_a_missing_rank_died(const char* op, std::uint64_t step, int only) {
  for (int r = 0; r < size_; ++r) {
    const RankLine& line = rank_line(*segment_, r);
    const bool behind = line.step.load(std::memory_order_acquire) < step;
    if ((only != kEveryRank && r != only) || !behind) continue;
    if (!process_gone(line.pid_ns, static_cast<long>(line.pid), line.start)) continue;
    const std::string reason = std::string(op) + ": rank " + std::to_string(r) +
                               " died (its process, pid " + std::to_string(line.pid) +
                               ", is gone) while this rank waited for it (shared-memory step " +
                               std::to_string(step) + ")";
    give_up(reason, /*timed_out=*/false);
    GC_THROW(DistributedError, health_->label(), ": ", reason);
  }
}

void ShmCollectives::barrier() {
  begin_step("barrier");
  finish_step("barrier");
}

void ShmCollectives::broadcast(void* data, std::size_t bytes, int root) {
  auto* bytes_out = static_cast<std::uint8_t*>(data);
  if (bytes == 0) return;
  if (bytes <= kEagerBytes) return eager_broadcast(data, bytes, root);
  if (single_copy_ && bytes >= kSingleCopyBytes) {
    // The root says where its buffer is; the others read it directly; the root leaves (and may
    // change its buffer) only once they are done.
    const int bank = begin_step("broadcast");
    if (rank_ == root) publish_address(bank, data, bytes);
    finish_step("broadcast");
    if (rank_ != root) read_from(root, bank, 0, bytes_out, bytes, "broadcast");
    begin_step("broadcast");
    finish_step("broadcast");
    throw_if_a_rank_gave_up("broadcast", kReadMayBeInvalid);
    return;
  }
  for (std::size_t offset = 0; offset < bytes; offset += kChunkBytes) {
    const std::size_t n = std::min(kChunkBytes, bytes - offset);
    const int bank = begin_step("broadcast");
    // Nobody waits for everyone: the root publishes its chunk and goes on (its next use of this
    // bank, two steps on, waits in begin_step until the readers are done with it); a reader
    // publishes that it arrived, waits for the root's chunk and copies it. So back-to-back chunks
    // and calls pipeline.
    if (rank_ == root) {
      detail::copy_bytes(slot(bank, root), bytes_out + offset, n);
      publish_step();
    } else {
      publish_step();
      wait_until("broadcast", step_, root);
      detail::copy_bytes(bytes_out + offset, slot(bank, root), n);
    }
  }
}

void ShmCollectives::eager_broadcast(void* data, std::size_t bytes, int root) {
  const std::uint64_t step = step_ + 1;
  if (rank_ == root) {
    // The slot was last written at step - kEagerSlots; a rank is done reading it once it has
    // published the step after that one (a rank publishes a step only after finishing the last).
    const std::uint64_t read = step > kEagerSlots ? step - kEagerSlots + 1 : 0;
    if (everyone_reached_ < read) {
      wait_until("broadcast", read, kEveryRank);
      everyone_reached_ = slowest_step();  // often well past `read`: no look for a while
    }
    detail::copy_bytes(eager_slot(step), data, bytes);
    publish_step();
    return;
  }
  publish_step();
  wait_until("broadcast", step, root);
  detail::copy_bytes(data, eager_slot(step), bytes);
}

void ShmCollectives::publish_address(int bank, const void* data, std::size_t bytes, int index) {
  const BufferAddress address{reinterpret_cast<std::uint64_t>(data), bytes};
  std::memcpy(slot(bank, rank_) + index * sizeof(address), &address, sizeof(address));
}

void ShmCollectives::read_from(int r, int bank, std::size_t offset, void* dst, std::size_t bytes,
                               const char* op, int index) {
  BufferAddress address{};
  std::memcpy(&address, slot(bank, r) + index * sizeof(address), sizeof(address));
  GC_ASSERT(offset + bytes <= address.bytes, health_->label(), ": ", op, ": rank ", r,
            " published ", address.bytes, " bytes, ", offset + bytes, " wanted");
  const RankLine* line = &rank_line(*segment_, r);
  if (!shm::read_peer_memory(static_cast<pid_t>(line->pid),
                             reinterpret_cast<const void*>(address.address + offset), dst, bytes)) {
    const std::string reason = std::string(op) + ": reading rank " + std::to_string(r) +
                               "'s buffer failed: " + std::strerror(errno) +
                               " (the process is gone?)";
    give_up(reason, /*timed_out=*/false);
    GC_THROW(DistributedError, health_->label(), ": ", reason);
  }
}

void ShmCollectives::all_gather(const void* in, void* out, std::size_t bytes) {
  gather_to("all_gather", in, out, bytes, kEveryRank);
}

void ShmCollectives::all_gatherv(const void* in, void* out, const std::vector<std::size_t>& bytes) {
  const auto* mine = static_cast<const std::uint8_t*>(in);
  auto* gathered = static_cast<std::uint8_t*>(out);
  std::vector<std::size_t> place(size_, 0);
  for (int r = 1; r < size_; ++r) place[r] = place[r - 1] + bytes[r - 1];
  const std::size_t longest = *std::max_element(bytes.begin(), bytes.end());
  // Step s moves bytes [s * kChunkBytes, (s + 1) * kChunkBytes) of every rank's part.
  for (std::size_t offset = 0; offset < longest; offset += kChunkBytes) {
    const int bank = begin_step("all_gatherv");
    auto piece = [&](int r) {
      return bytes[r] > offset ? std::min(kChunkBytes, bytes[r] - offset) : std::size_t{0};
    };
    if (const std::size_t n = piece(rank_)) detail::copy_bytes(slot(bank, rank_), mine + offset, n);
    finish_step("all_gatherv");
    for (int r = 0; r < size_; ++r) {
      if (const std::size_t n = piece(r))
        detail::copy_bytes(gathered + place[r] + offset, slot(bank, r), n);
    }
  }
}

void ShmCollectives::gather(const void* in, void* out, std::size_t bytes, int root) {
  gather_to("gather", in, out, bytes, root);
}

void ShmCollectives::gather_to(const char* op, const void* in, void* out, std::size_t bytes,
                               int root) {
  const auto* mine = static_cast<const std::uint8_t*>(in);
  auto* gathered = static_cast<std::uint8_t*>(out);
  if (single_copy_ && bytes >= kSingleCopyBytes) {
    // Every rank says where its part is; the receivers read the others' parts directly; nobody
    // leaves (and may change its input) before every receiver is done.
    const int bank = begin_step(op);
    publish_address(bank, in, bytes);
    finish_step(op);
    if (root == kEveryRank || rank_ == root) {
      for (int r = 0; r < size_; ++r) {
        std::uint8_t* place = gathered + static_cast<std::size_t>(r) * bytes;
        if (r != rank_) {
          read_from(r, bank, 0, place, bytes, op);
        } else if (place != mine) {
          detail::copy_large(place, mine, bytes);  // streamed from 4 MiB on
        }
      }
    }
    begin_step(op);
    finish_step(op);
    throw_if_a_rank_gave_up(op, kReadMayBeInvalid);
    return;
  }
  for (std::size_t offset = 0; offset < bytes; offset += kChunkBytes) {
    const std::size_t n = std::min(kChunkBytes, bytes - offset);
    const int bank = begin_step(op);
    detail::copy_bytes(slot(bank, rank_), mine + offset, n);
    finish_step(op);
    if (root != kEveryRank && rank_ != root) continue;
    for (int r = 0; r < size_; ++r) {
      detail::copy_bytes(gathered + static_cast<std::size_t>(r) * bytes + offset, slot(bank, r), n);
    }
  }
}

/// Reduces element ranges of the ranks' slots of one bank, in rank order on every rank (so every
/// rank that reduces the same range gets bit-identical results).
class ShmCollectives::SlotReducer {
 public:
  SlotReducer(const ShmCollectives& owner, DType dtype, ReduceOp op)
      : owner_(owner),
        element_(dtype_size(dtype)),
        narrow_(narrow_sum(dtype, op)),
        fn_(narrow_ ? ReduceFunction() : reduce_function(dtype, op)),
        parts_(static_cast<std::size_t>(owner.size_)) {}

  /// dst[0, n) = reduction over ranks r of slot(bank, r)[from, from + n) (elements). With `own`,
  /// this rank's elements are read from there instead of its slot (`own` must not overlap dst
  /// unless it is dst itself on rank 0 or 1, which the pairwise kernels allow).
  void operator()(void* dst, int bank, std::size_t from, std::size_t n,
                  const std::uint8_t* own = nullptr) {
    const std::size_t skip = from * element_;
    for (int r = 0; r < owner_.size_; ++r) {
      parts_[r] = own != nullptr && r == owner_.rank_ ? own : owner_.slot(bank, r) + skip;
    }
    combine(dst, n);
  }

  /// dst[0, n) = reduction over ranks r of part(r)[0, n), which the caller has set. Only part(0)
  /// or part(1) may be dst itself (the pairwise kernels allow that).
  void combine(void* dst, std::size_t n) {
    if (narrow_) return narrow_(dst, parts_, n);
    // The first pair straight into dst (one pass fewer than copying slot 0 first).
    fn_(dst, parts_[0], parts_[1], n);
    for (int r = 2; r < owner_.size_; ++r) fn_(dst, dst, parts_[r], n);
  }

  /// Rank r's operand for combine().
  const void*& part(int r) { return parts_[static_cast<std::size_t>(r)]; }
  std::size_t element() const { return element_; }

 private:
  const ShmCollectives& owner_;
  std::size_t element_;
  NarrowSum narrow_;
  ReduceFunction fn_;
  std::vector<const void*> parts_;
};

void ShmCollectives::all_reduce(const void* in, void* out, std::size_t count, DType dtype,
                                ReduceOp op) {
  SlotReducer reduce(*this, dtype, op);
  const std::size_t element = reduce.element();
  if (count * element >= direct_all_reduce_bytes_) {
    return all_reduce_direct(in, out, count, reduce);
  }

  const std::size_t per_step = kChunkBytes / element;
  const auto* input = static_cast<const std::uint8_t*>(in);
  auto* output = static_cast<std::uint8_t*>(out);
  // Out of place, the split reduction reads this rank's part from the input itself (in place it
  // could be overwritten before a rank >= 2 reads it, so it goes through the slot as the rest).
  const std::size_t total = count * element;
  const bool apart = input + total <= output || output + total <= input;
  for (std::size_t first = 0; first < count; first += per_step) {
    const std::size_t n = std::min(per_step, count - first);
    const std::uint8_t* chunk = input + first * element;
    std::uint8_t* result = output + first * element;
    const std::size_t per_part = (n + size_ - 1) / size_;
    auto part = [&](int r) {
      const std::size_t from = std::min(n, r * per_part);
      return std::make_pair(from, std::min(n, from + per_part) - from);
    };
    const bool split = n * element >= kSplitReductionBytes;
    const int bank = begin_step("all_reduce");
    if (split && apart) {
      // Only the parts the other ranks reduce: (size - 1) / size of the chunk.
      for (int r = 0; r < size_; ++r) {
        const auto [r_from, r_length] = part(r);
        if (r != rank_ && r_length > 0) {
          detail::copy_bytes(slot(bank, rank_) + r_from * element, chunk + r_from * element,
                             r_length * element);
        }
      }
    } else {
      detail::copy_bytes(slot(bank, rank_), chunk, n * element);
    }
    finish_step("all_reduce");
    if (!split) {
      reduce(result, bank, 0, n);  // one-shot: every rank reduces the whole chunk
      continue;
    }
    // Large chunk: rank r reduces only part r, into its result and its slot of the other bank,
    // then copies the other parts from the other ranks' slots: each rank reads the chunk once
    // from every rank instead of reducing all of it, at the cost of one more step.
    const int other = begin_step("all_reduce");
    const auto [from, length] = part(rank_);
    if (length > 0) {
      std::uint8_t* mine = result + from * element;
      reduce(mine, bank, from, length, apart ? chunk + from * element : nullptr);
      detail::copy_bytes(slot(other, rank_), mine, length * element);  // still in cache
    }
    finish_step("all_reduce");
    for (int r = 0; r < size_; ++r) {
      const auto [r_from, r_length] = part(r);
      if (r != rank_ && r_length > 0) {
        detail::copy_bytes(result + r_from * element, slot(other, r), r_length * element);
      }
    }
  }
}

void ShmCollectives::all_reduce_direct(const void* in, void* out, std::size_t count,
                                       SlotReducer& reduce) {
  const char* op = "all_reduce";
  const std::size_t element = reduce.element();
  const std::size_t total = count * element;
  const auto* input = static_cast<const std::uint8_t*>(in);
  auto* output = static_cast<std::uint8_t*>(out);
  const std::size_t per_part = (count + size_ - 1) / size_;
  auto part = [&](int r) {
    const std::size_t from = std::min(count, r * per_part);
    return std::make_pair(from * element, (std::min(count, from + per_part) - from) * element);
  };
  const std::size_t piece_max = kDirectPieceBytes / element * element;
  if (scratch_.size() < static_cast<std::size_t>(size_) * piece_max) {
    // Before the first step: a rank that failed after publishing its buffers would leave its
    // peers reading them.
    scratch_.resize(static_cast<std::size_t>(size_) * piece_max);
  }
  // Everyone says where its input (index 0) and its result (index 1) are.
  const int bank = begin_step(op);
  publish_address(bank, in, total, 0);
  publish_address(bank, out, total, 1);
  finish_step(op);

  // Part rank_ of the result: every rank's part rank_ of its input, read straight from there,
  // reduced in rank order (so the part is bit-identical to what the slot path gives).
  const auto [from, length] = part(rank_);
  auto scratch = [&](int r) { return scratch_.data() + static_cast<std::size_t>(r) * piece_max; };
  for (std::size_t done = 0; done < length; done += piece_max) {
    const std::size_t piece = std::min(piece_max, length - done);
    std::uint8_t* dst = output + from + done;
    const std::uint8_t* own = input + from + done;  // dst itself in place
    if (own == dst && rank_ >= 2) {
      // combine() lets only rank 0's or 1's operand be dst: a later rank keeps a copy of its own.
      detail::copy_bytes(scratch(rank_), own, piece);
      own = scratch(rank_);
    }
    // While dst holds no operand, the first remote one of rank 0 or 1 is read straight into it.
    bool dst_free = own != dst;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) {
        reduce.part(r) = own;
      } else if (dst_free && r <= 1) {
        read_from(r, bank, from + done, dst, piece, op, 0);
        reduce.part(r) = dst;
        dst_free = false;
      } else {
        read_from(r, bank, from + done, scratch(r), piece, op, 0);
        reduce.part(r) = scratch(r);
      }
    }
    reduce.combine(dst, piece / element);
  }
  begin_step(op);  // every part reduced: the inputs are no longer read
  finish_step(op);

  // The other parts, from the results of the ranks that reduced them. (Reading, not writing
  // into the peers: a rank that gave up on the step at its deadline may have freed its buffers,
  // and a late peer must not write into that memory.)
  for (int r = 0; r < size_; ++r) {
    const auto [r_from, r_length] = part(r);
    if (r != rank_ && r_length > 0) read_from(r, bank, r_from, output + r_from, r_length, op, 1);
  }
  begin_step(op);  // nobody returns (and reuses its result) while others read it
  finish_step(op);
  throw_if_a_rank_gave_up(op, kReadMayBeInvalid);
}

void ShmCollectives::reduce_scatter(const void* in, void* out,
                                    const std::vector<std::size_t>& counts, DType dtype,
                                    ReduceOp op) {
  SlotReducer reduce(*this, dtype, op);
  const std::size_t element = reduce.element();
  const std::size_t per_step = kChunkBytes / element;
  std::size_t mine_from = 0;  // this rank's part of the input, in elements
  for (int r = 0; r < rank_; ++r) mine_from += counts[r];
  const std::size_t mine_to = mine_from + counts[rank_];
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  const auto* input = static_cast<const std::uint8_t*>(in);
  auto* output = static_cast<std::uint8_t*>(out);
  // One step per chunk of the input: every rank publishes the chunk, then reduces the part of it
  // that is its own (the first phase of the split all_reduce, without the copy-out phase).
  for (std::size_t first = 0; first < total; first += per_step) {
    const std::size_t n = std::min(per_step, total - first);
    const int bank = begin_step("reduce_scatter");
    detail::copy_bytes(slot(bank, rank_), input + first * element, n * element);
    finish_step("reduce_scatter");
    const std::size_t from = std::max(first, mine_from);
    const std::size_t to = std::min(first + n, mine_to);
    if (from < to) reduce(output + (from - mine_from) * element, bank, from - first, to - from);
  }
}

}  // namespace groupcoord
