// Collectives of a group whose ranks share a node, through one shared-memory segment instead of
// Gloo's loopback TCP (a few hundred nanoseconds per small call instead of tens to hundreds of
// microseconds).
//
// Layout (every part 64-byte aligned): one cache line per rank holding that rank's step counter,
// then two banks of one slot per rank, kChunkBytes each. A collective runs as one or more steps;
// step k uses bank k % 2. In step k a rank writes its data (if any) into its slot of the bank,
// publishes k in its counter (release), waits until the ranks it reads from have published k
// (acquire), and reads their slots. A rank publishes k only after it finished reading step k - 1,
// so the bank of step k + 1 (last used by step k - 1) is free once every counter is >= k:
// begin_step() checks that (free after a step that waited for everyone, a wait otherwise).
// Most steps wait for every rank; broadcast's do not: the root publishes its chunk and goes on,
// a reader waits for the root only, so chunks and back-to-back calls pipeline. A broadcast of at
// most kEagerBytes goes through a ring of kEagerSlots small slots after the banks instead (slot
// step % kEagerSlots): its root waits only until every rank is done with the step that last used
// that slot, so it may run up to kEagerSlots - 1 broadcasts ahead of its slowest reader (as
// Open MPI's eager sends do) instead of one; most visible when ranks share cores.
//
// all_reduce of a small chunk takes one step (every rank reduces all of it); from
// kSplitReductionBytes on it takes two: rank r reduces part r of the chunk into its result and
// its slot of the next step's bank, and copies the other parts out of the other ranks' slots.
// Out of place, a rank copies into its slot only the parts the others reduce and reads its own
// part from its input (for 2 ranks, half the copy-in). Every reduction runs in rank order
// (slot 0, then 1, ...), so every rank of the group gets bit-identical results: sums of fp16, bf16
// and fp8 accumulate in float and round once, the rest uses the group's pairwise kernels
// (reduce_functions.h).
//
// broadcast, all_gather and gather of kSingleCopyBytes (per rank) and more skip the slots when
// every rank can read the others' memory (core/cross_memory.h, probed at set-up): each rank
// publishes where its buffer is, the receivers copy straight from it, and a last step keeps every
// buffer unchanged until its readers are done: one copy instead of two, as Open MPI does.
// all_reduce of kSingleCopyReduceBytes and more does the same: every rank publishes its input and
// its result; rank r reads part r of every other input (piece by piece) and reduces it in rank
// order into its result; after a step every rank reads the other parts from the others' results;
// a last step keeps everyone until those reads are done. No byte goes through the slots, whose
// writes (lines the peers had just read) were where the slot path spent its time at 1 MiB and
// more. A rank only ever reads a peer's memory, never writes it: a peer that gave up at its
// deadline may have freed its buffers.
//
// Set-up is collective, over the group's Gloo context, when the group is created:
// rank 0 creates the segment (owner-only, a unique name), broadcasts the name, the others map it,
// and the ranks agree (all of them mapped it, none has GROUPCOORD_CPU_SHM=0) before everyone
// unlinks the name; so nothing is left in /dev/shm once set-up returns, even after a crash. Ranks
// on other nodes cannot map it, and then the group keeps using Gloo.
//
// Waits spin briefly, then sleep on a futex in the segment until a rank publishes a step
// (core/wake_word.h): they wake within microseconds after any pause, cost no CPU while idle, let
// oversubscribed runs progress, and end at the group's timeout: a peer that never arrives (dead, or
// not calling the collective) makes the others throw TimeoutError naming the group, the op and the
// missing ranks, and the group is marked broken. A rank that gives up (that timeout, or a failed
// read of a peer's memory) also sets a word in the segment before it can free anything: the other
// ranks then raise at once, with the same kind of error (TimeoutError when it timed out), instead
// of waiting for their own deadline, and a
// single-copy collective that read buffers of a rank that gave up raises rather than returning
// what it read (the buffers may have been freed meanwhile).
//
// The waits are paced (core/wait_pacing.h): when a rank's last long waits had about the same
// length (an engine's steps), it sleeps only until shortly before the next one is due and polls
// through it, so the late rank's publish finds it awake and makes no wake-up call (on a VM whose
// idle vCPUs halt that call costs the publisher tens of µs: docs/benchmarks/paced_waits.md).
// Only waits of WaitPacing::kShortestIgnored and more shape the prediction: the short waits
// between the steps of one call, or between the calls of one engine step (broadcast_object's size,
// then its payload), would otherwise break every pattern.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/wait_pacing.h"
#include "groupcoord/dtype.h"
#include "groupcoord/reduce_op.h"

namespace groupcoord {

class GroupHealth;

namespace shm {
class SharedMemory;
struct WakeWord;
}  // namespace shm

/// The shared-memory collectives of one group (see the file comment).
class ShmCollectives {
 public:
  /// Bytes of one rank's slot: the most a rank moves per step.
  static constexpr std::size_t kChunkBytes = std::size_t{256} << 10;
  /// all_reduce chunks from this size on are reduced in parts, one per rank, over two steps
  /// (each rank reduces 1/size of the chunk); smaller ones in one step, each rank reducing all.
  static constexpr std::size_t kSplitReductionBytes = std::size_t{32} << 10;
  /// broadcasts of at most this many bytes go through the eager slots (the file comment). All
  /// of them (16 KiB) stay in a core's L1 cache; with 4 KiB slots 4 KiB broadcasts between two
  /// ranks took 0.56-0.68 µs against 0.36-0.42 through the banks (session 23).
  static constexpr std::size_t kEagerBytes = std::size_t{1} << 10;
  /// How many eager slots: how far a broadcast's root may run ahead of its readers (4 ranks on 2
  /// cores: 1 B-1 KiB broadcasts 0.8-1.2 µs per call, against 5-6 µs with the banks' one step).
  static constexpr std::uint64_t kEagerSlots = 16;
  /// broadcast and all_gather / gather of this many bytes (per rank) and more copy straight from
  /// the peers' buffers (core/cross_memory.h) when every rank can, instead of through the slots.
  static constexpr std::size_t kSingleCopyBytes = std::size_t{64} << 10;
  /// In groups of 2, all_reduce of this many bytes and more reads the peers' inputs and results
  /// directly (when every rank can) instead of going through the slots, whose writes are what
  /// large all_reduces spent their time on (docs/benchmarks/cpu_collectives.md, session 9). At 1
  /// MiB the direct path took 1.04-1.16x Open MPI's time and the slots 1.16-1.33x in alternating
  /// runs (session 23; session 15 had measured the opposite); at 512 KiB the two were even.
  /// GROUPCOORD_CPU_DIRECT_ALL_REDUCE_KIB sets the size for any group (0: never).
  static constexpr std::size_t kSingleCopyReduceBytes = std::size_t{1} << 20;
  /// The direct all_reduce reads and reduces the peers' operands in pieces of this many bytes:
  /// fewer, longer reads of a peer's memory. 1 MiB pieces took 0.91-0.96x Open MPI's time at 4 MiB
  /// and 256 KiB pieces 1.02-1.10x in alternating runs; 64 and 128 KiB were slower still
  /// (session 23).
  static constexpr std::size_t kDirectPieceBytes = std::size_t{1} << 20;

  /// Runs a collective of the group's Gloo path (used for the set-up's name exchange and
  /// agreement): `broadcast(data, bytes, root)` and `all_reduce_min(value)`.
  struct SetupChannel {
    std::function<void(void* data, std::size_t bytes, int root)> broadcast;
    std::function<std::int32_t(std::int32_t value)> all_reduce_min;
  };

  /// Collective over the group: the segment, or nullptr when some rank cannot map it (another
  /// node), has GROUPCOORD_CPU_SHM=0, or fails to create it (logged; the group uses Gloo).
  static std::unique_ptr<ShmCollectives> create(int rank, int size, const std::string& group_name,
                                                std::shared_ptr<GroupHealth> health,
                                                std::chrono::milliseconds timeout,
                                                const SetupChannel& channel);

  ~ShmCollectives();
  ShmCollectives(const ShmCollectives&) = delete;
  ShmCollectives& operator=(const ShmCollectives&) = delete;

  /// out = reduction over ranks of in (count elements); `in` may equal `out`.
  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op);
  /// out (counts[rank] elements) = reduction over ranks of this rank's part of `in`, which holds
  /// every rank's part one after the other (sum of counts elements). `out` must not overlap `in`.
  void reduce_scatter(const void* in, void* out, const std::vector<std::size_t>& counts,
                      DType dtype, ReduceOp op);
  /// The root's `bytes` bytes at `data` into every rank's `data`.
  void broadcast(void* data, std::size_t bytes, int root);
  /// Rank r's `bytes` bytes from `in` into out[r * bytes, (r + 1) * bytes) on every rank; `in`
  /// may be this rank's part of `out`.
  void all_gather(const void* in, void* out, std::size_t bytes);
  /// As all_gather with rank r contributing bytes[r] bytes, placed one after the other in `out`;
  /// `in` may be this rank's place in `out`.
  void all_gatherv(const void* in, void* out, const std::vector<std::size_t>& bytes);
  /// As all_gather, but only `root` receives (into `out`; the root's `in` may be its own part of
  /// `out`, and must not overlap `out` otherwise: ProcessGroup::gather stages such an input).
  void gather(const void* in, void* out, std::size_t bytes, int root);
  /// Returns once every rank has called it.
  void barrier();
  /// Whether large broadcast / gather messages are read from the peers' buffers directly.
  bool single_copy() const { return single_copy_; }
  /// Wake-up calls made so far by any rank's publish (a publish that found a waiting rank asleep),
  /// for tests and benchmarks.
  std::uint32_t wake_ups() const;

 private:
  class SlotReducer;

  ShmCollectives(int rank, int size, std::shared_ptr<GroupHealth> health,
                 std::chrono::milliseconds timeout, std::unique_ptr<shm::SharedMemory> segment,
                 bool single_copy, std::size_t direct_all_reduce_bytes);

  /// Bytes of the whole segment for `size` ranks.
  static std::size_t segment_bytes(int size);
  /// gather_to's root meaning "every rank receives" (all_gather).
  static constexpr int kEveryRank = -1;
  /// all_gather (root kEveryRank) or gather to `root`; `op` names it in errors.
  void gather_to(const char* op, const void* in, void* out, std::size_t bytes, int root);
  /// The word waiting ranks sleep on; every publish rings it.
  shm::WakeWord& wake_word() const;
  /// Set (never cleared) by the first rank that gave up on the group, at a deadline or on a
  /// failed read: which rank, and why.
  std::atomic<std::uint64_t>& given_up() const;
  /// Sets given_up() (before this rank can free anything a peer reads) and marks the group broken.
  void give_up(const std::string& reason, bool timed_out);
  /// When a rank gave up: marks the group broken and throws, saying `what` — TimeoutError when
  /// that rank's deadline expired, else DistributedError. Every wait checks first; the
  /// single-copy paths check after their last step too (the peer may have freed what they read).
  void throw_if_a_rank_gave_up(const char* op, const char* what);
  /// Rank r's slot of `bank`.
  std::uint8_t* slot(int bank, int r) const;
  /// The eager slot of `step` (shared by the group: one root writes it per step).
  std::uint8_t* eager_slot(std::uint64_t step) const;
  /// broadcast of at most kEagerBytes through the eager slots.
  void eager_broadcast(void* data, std::size_t bytes, int root);
  /// Starts the next step: returns its bank, which this rank may now write (it waits, if needed,
  /// until every rank is done with the bank's previous use). `op` names the collective in errors.
  int begin_step(const char* op);
  /// Publishes this rank's arrival at the step and waits for every rank's; throws (and marks the
  /// group broken) at the deadline.
  void finish_step(const char* op);
  /// The lowest step any rank has published (this rank's own counts as step_).
  std::uint64_t slowest_step() const;
  /// Publishes this rank's arrival at the next step without waiting for anyone.
  void publish_step();
  /// Waits until rank `only` (kEveryRank: every rank) has published `step`; throws (and marks the
  /// group broken) at the deadline, naming the ranks that did not.
  void wait_until(const char* op, std::uint64_t step, int only);
  /// wait_until's dead-peer check: when a rank it waits for (`only`, or every rank behind `step`)
  /// no longer runs, gives up on the group and throws DistributedError naming it, long before
  /// the deadline.
  void throw_if_a_missing_rank_died(const char* op, std::uint64_t step, int only);
  /// all_reduce through the peers' memory (single copy), for large messages.
  void all_reduce_direct(const void* in, void* out, std::size_t count, SlotReducer& reduce);
  /// Single copy: writes where this rank's buffer is into its slot of `bank` (address `index`:
  /// a step may publish several buffers).
  void publish_address(int bank, const void* data, std::size_t bytes, int index = 0);
  /// Single copy: reads `bytes` at `offset` of the buffer rank `r` published in `bank` (address
  /// `index`) into `dst`; DistributedError (the group marked broken) when the kernel refuses or
  /// `r` is gone.
  void read_from(int r, int bank, std::size_t offset, void* dst, std::size_t bytes, const char* op,
                 int index = 0);

  int rank_;
  int size_;
  std::shared_ptr<GroupHealth> health_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<shm::SharedMemory> segment_;
  std::uint64_t step_ = 0;  ///< steps published by this rank
  /// Every rank's published step is known to be at least this (after a full finish_step, the
  /// current step; after a step that waited for one rank only, possibly less).
  std::uint64_t everyone_reached_ = 0;
  /// Every rank can read the others' memory (agreed at set-up; GROUPCOORD_CPU_SINGLE_COPY=0 on
  /// any rank turns it off).
  bool single_copy_ = false;
  /// all_reduce of this many bytes and more takes the direct path (agreed at set-up; SIZE_MAX:
  /// never).
  std::size_t direct_all_reduce_bytes_;
  /// The direct all_reduce's pieces of the peers' operands (one piece per rank), kept between
  /// calls.
  std::vector<std::uint8_t> scratch_;
  /// When this rank's long waits tend to end, so that it is awake for the next (the file comment).
  /// One object for all of this rank's waits, used by one thread at a time: the group's
  /// collectives are (groupcoord/process_group.h, "Threading"), as step_ above already requires.
  shm::WaitPacing pacing_{shm::WaitPacing::enabled_by_default(),
                          shm::WaitPacing::ShortWaits::kIgnore};
};

}  // namespace groupcoord
