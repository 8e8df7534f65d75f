// ProcessGroup: one Gloo context over a subset of the world's ranks, carrying host-memory
// collectives and tagged point-to-point byte transfers. It is the CPU group under every
// GroupCoordinator (docs/architecture.md) and the device group when the backend is Gloo.
//
// Collective rule (every collective below, and new_group): every rank of the group must call it,
// in the same order, with matching arguments (counts, dtype, root). A rank that does not show up
// makes the others throw TimeoutError after the group's timeout.
//
// Threading: the collectives of one group must be called from one thread at a time (they share
// the group's tag sequence, which must advance identically on every rank). send/recv/isend/irecv
// may be called from any thread, concurrently with collectives and with each other; two
// concurrent streams between the same pair of ranks should use different tags, because the
// matching order of transfers with the same (peer, tag) follows the order in which they were
// posted.
//
// Errors: std::invalid_argument for bad arguments (nothing was sent), TimeoutError when an
// operation ran past the group's timeout, DistributedError for a dead or misbehaving peer. After a
// TimeoutError or DistributedError from the transport the group is broken (Gloo tears the
// connections down): every later call throws DistributedError at once. Messages name the group,
// the operation and the ranks involved. A receive whose size differs from what the peer sent
// raises DistributedError on the receiver (the message is dropped; the group stays usable).
//
// Point-to-point deadlines count from when the transfer is posted: an isend whose receiver does
// not post the matching receive within the group's timeout fails with TimeoutError (and, as with
// any Gloo timeout, breaks the group).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "groupcoord/default_timeout.h"
#include "groupcoord/dtype.h"
#include "groupcoord/reduce_op.h"
#include "groupcoord/store.h"
#include "groupcoord/work.h"

namespace groupcoord {

class ShmCollectives;

/// How a ProcessGroup is created.
struct ProcessGroupOptions {
  /// Deadline of every operation of the group: rendezvous, collectives, send/recv waits.
  std::chrono::milliseconds timeout = default_timeout();
  /// Name used in every error message, e.g. "world", "tp:0". new_group() derives one from the
  /// parent's name when empty.
  std::string name;
  /// Address the Gloo transport binds to (create_world only; sub-groups share the world's
  /// transport). Empty: the interface named by GLOO_SOCKET_IFNAME if set, else 127.0.0.1 when
  /// single_node, else the address this host's name resolves to.
  std::string bind_address;
  /// Every rank runs on this host: the loopback address is enough (create_world only).
  bool single_node = false;
};

/// A group of processes connected by one Gloo context (full mesh over TCP).
///
/// Created collectively by create_world() and new_group(). Owned through std::shared_ptr;
/// destroy() (or the last owner going away) releases the connections.
class ProcessGroup {
 public:
  struct State;  ///< Private implementation (src/process_group/group_state.h).

  /// Collective over all world ranks: connects `world_size` processes through `store` (the job's
  /// world store) and returns the world group. Every rank calls it with the same world_size and
  /// timeout. Calling it again later (after destroying the previous world, or for a second world
  /// on the same store) is fine: each call rendezvouses under a fresh store prefix.
  /// Throws std::invalid_argument for a bad rank/size, TimeoutError when peers do not show up.
  static std::shared_ptr<ProcessGroup> create_world(std::shared_ptr<Store> store, int rank,
                                                    int world_size,
                                                    ProcessGroupOptions options = {});

  /// Collective over every rank of *this* group, called in the same order everywhere (like
  /// torch's new_group): creates a group over `ranks` (ranks of this group, in the order that
  /// defines the new group's ranks; no duplicates). Returns nullptr on ranks outside it.
  /// `options` defaults to this group's timeout and a derived name; its transport fields are
  /// ignored (the world's transport is shared).
  std::shared_ptr<ProcessGroup> new_group(
      const std::vector<int>& ranks, std::optional<ProcessGroupOptions> options = std::nullopt);

  /// Collective over the ranks of this group that are not in `excluded` (group ranks; a member
  /// that died, or one leaving on request): connects the survivors in a new group under a fresh
  /// store prefix, then retires this group, whose later calls throw DistributedError naming the
  /// shrink. Works on a broken group (that is what it is for); the survivors must have agreed on
  /// `excluded` beforehand (GroupCoordinator::shrink does it through the store), in the same
  /// order as their other collectives. New group ranks follow the old order without the
  /// excluded ones. `new_world_ranks` (one per survivor, in that order) renumbers the members
  /// after a world shrink; empty keeps their world ranks. `shrink_id` names the new group's store
  /// prefix and must be the same on every survivor: an id the survivors agreed on (a retry after a
  /// failed attempt must not depend on how far each survivor got), or empty for a count of this
  /// group's shrinks. Returns nullptr on an excluded rank.
  std::shared_ptr<ProcessGroup> shrink(const std::vector<int>& excluded,
                                       const std::vector<int>& new_world_ranks = {},
                                       const std::string& shrink_id = {});

  /// Destroys the group (see destroy()); logs rather than throws.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// This process's rank in the group.
  int rank() const;
  /// Number of ranks in the group.
  int size() const;
  /// World rank of each member, in group order.
  const std::vector<int>& world_ranks() const;
  /// The group's name (as used in error messages).
  const std::string& name() const;
  /// Deadline of each operation.
  std::chrono::milliseconds timeout() const;
  /// This group's store: the world store under this group's private prefix.
  std::shared_ptr<Store> store() const;
  /// True after a transport error broke the group (later calls throw DistributedError).
  bool is_broken() const;
  /// True when the group's collectives (all_reduce, broadcast, all_gather(v), gather, barrier)
  /// run through shared memory: all ranks on one node and none with GROUPCOORD_CPU_SHM=0. Set up
  /// when the group is created; false for groups of one.
  bool uses_shared_memory() const;
  /// True when, on top of shared memory, large broadcast / all_gather / gather messages are read
  /// straight from the peers' buffers (one copy; Linux cross-memory attach, agreed by every rank
  /// at creation; GROUPCOORD_CPU_SINGLE_COPY=0 on any rank turns it off).
  bool uses_single_copy() const;

  // ---- collectives on host memory (every DType; see the collective rule above) -------------

  /// Copies `count` elements from `root`'s `data` into `data` on every other rank.
  void broadcast(void* data, std::size_t count, DType dtype, int root);
  /// Reduces `data` element-wise across ranks, in place. Float16, BFloat16 and fp8 accumulate
  /// each step in float and round; Bool: sum and max are logical or, min is logical and.
  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op = ReduceOp::Sum);
  /// As all_reduce, reading `in` and writing `out` (`in` is left unchanged; may equal `out`).
  void all_reduce(const void* in, void* out, std::size_t count, DType dtype,
                  ReduceOp op = ReduceOp::Sum);
  /// Reduces `in` element-wise across ranks and keeps this rank's part: `in` holds every rank's
  /// part one after the other (counts[r] elements for rank r), `out` receives counts[rank()]
  /// elements and must not overlap `in`. Through shared memory each rank reduces only its part;
  /// over Gloo it is an all_reduce of the whole input and a copy.
  void reduce_scatter(const void* in, void* out, const std::vector<std::size_t>& counts,
                      DType dtype, ReduceOp op = ReduceOp::Sum);
  /// Concatenates every rank's `count_per_rank` elements of `in` into `out` (size() *
  /// count_per_rank elements), in rank order.
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype);
  /// As all_gather with per-rank sizes: rank r contributes counts[r] elements (`in` holds
  /// counts[rank()]); `out` holds their sum. Zero counts are allowed.
  void all_gatherv(const void* in, void* out, const std::vector<std::size_t>& counts, DType dtype);
  /// Concatenates every rank's `count` elements into `out` on `root` (size() * count elements);
  /// `out` is not touched, and may be null, elsewhere. The root's `in` may overlap `out` (an input
  /// anywhere but exactly at the root's own place is copied aside first).
  void gather(const void* in, void* out, std::size_t count, DType dtype, int root);
  /// Returns once every rank of the group has entered the barrier.
  void barrier();

  // ---- point to point (any thread) ----------------------------------------------------------

  /// Sends `nbytes` to group rank `dst`; returns once the receiver has posted the matching recv
  /// and the bytes have left `data`. `tag` separates independent streams between the same two
  /// ranks; the receiver's recv must use the same tag and size.
  void send(const void* data, std::size_t nbytes, int dst, std::uint32_t tag = 0);
  /// Receives exactly `nbytes` from group rank `src` on `tag`. Throws DistributedError (and drops
  /// the message) when the sender sent a different number of bytes.
  void recv(void* data, std::size_t nbytes, int src, std::uint32_t tag = 0);
  /// Starts a send and returns at once; `data` must stay valid until the Work completes.
  /// Sends to the same (dst, tag) are received in the order they were posted.
  std::shared_ptr<Work> isend(const void* data, std::size_t nbytes, int dst, std::uint32_t tag = 0);
  /// Starts a receive and returns at once; `data` must stay valid until the Work completes.
  std::shared_ptr<Work> irecv(void* data, std::size_t nbytes, int src, std::uint32_t tag = 0);

  /// Releases the group: waits (bounded by min(timeout, 10 s)) for in-flight isend/irecv to
  /// finish, aborts the rest (their Work then reports DistributedError) and closes the Gloo
  /// context. Idempotent; every later call other than the accessors throws DistributedError.
  /// Not collective, but peers still using the group will see their transfers fail.
  void destroy();

  /// Internal: use create_world() / new_group().
  explicit ProcessGroup(std::shared_ptr<State> state);

 private:
  /// Collective, run once by create_world / new_group (`op`): sets up the same-node
  /// shared-memory collectives, or leaves them off when the group spans nodes or
  /// GROUPCOORD_CPU_SHM=0 (then Gloo carries everything). A failed set-up throws as `op` would.
  void set_up_shared_memory(const char* op);
  /// destroy()'s work; `why` is added to later refusals, and a non-empty `why` (a shrink) aborts
  /// in-flight transfers at once instead of waiting for them.
  void release(const std::string& why);

  std::shared_ptr<State> state_;
};

}  // namespace groupcoord
