// The private state behind a ProcessGroup handle.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "groupcoord/process_group.h"
#include "groupcoord/store.h"
#include "process_group/async_op.h"
#include "process_group/gloo_transport.h"
#include "process_group/group_health.h"
#include "process_group/p2p_protocol.h"
#include "process_group/shm_collectives.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace groupcoord {

/// Everything a group owns. Immutable after construction except where noted.
struct ProcessGroup::State {
  int rank = 0;
  int size = 0;
  std::vector<int> world_ranks;
  std::string name;
  std::chrono::milliseconds timeout{0};
  std::string prefix;                  ///< this group's namespace in the world store
  std::shared_ptr<Store> world_store;  ///< the unprefixed world store (sub-groups nest in it)
  std::shared_ptr<Store> store;        ///< the world store under `prefix`
  std::shared_ptr<GroupHealth> health;

  /// Same-node shared-memory collectives (shm_collectives.h), set up when the group is created;
  /// null when the ranks span nodes or the transport is off (then Gloo carries the
  /// collectives). The mapping lives as long as the state: a collective still waiting when
  /// destroy() runs on another thread sees the group destroyed and throws.
  std::unique_ptr<ShmCollectives> shm;

  /// Tag of the next collective. Only the collectives' thread touches it; it advances
  /// identically on every rank because they call the same collectives in the same order.
  std::uint32_t next_tag = 0;
  /// Number of new_group() calls so far (names the child's store prefix).
  std::atomic<std::uint64_t> next_child{0};
  /// Number of shrink() calls so far (names the successor's store prefix).
  std::uint64_t shrink_attempts = 0;

  /// Guards the fields below against destroy() running on another thread.
  std::mutex mutex;
  std::shared_ptr<GlooTransport> transport;
  std::shared_ptr<gloo::Context> context;
  /// Guards `ops` (taken inside `mutex`, or alone: the group's first break aborts the ops from
  /// wherever it happens, `mutex` held or not).
  std::mutex ops_mutex;
  /// isend/irecv/send/recv still (possibly) in flight, so destroy() can wait for or abort them.
  std::vector<std::weak_ptr<AsyncOp>> ops;
  /// Ordering state of each (source rank, tag) receive stream.
  std::map<std::pair<int, std::uint32_t>, std::shared_ptr<RecvStream>> recv_streams;

  /// The context, after checking that the group is usable for `op`.
  std::shared_ptr<gloo::Context> acquire(const char* op);

  /// Records `op` so that destroy() can find it; throws DistributedError (without recording) when
  /// the group was destroyed or broke in the meantime. Call with `mutex` held.
  void register_op_locked(const std::shared_ptr<AsyncOp>& op, const char* what);

  /// Waits up to `bound` for the recorded ops, aborts the rest and forgets them all.
  void drain_ops(std::chrono::milliseconds bound);

  /// Aborts the recorded ops that are still pending (they raise, naming `why`). For the group's
  /// first break: its connections are about to close, and a transfer waiting on one would
  /// otherwise wait for its deadline. Takes only `ops_mutex`.
  void abort_ops(const std::string& why);
};

/// "group 'tp:0' (rank 1 of 2, world ranks [2, 3])".
std::string group_label(const std::string& name, int rank, const std::vector<int>& world_ranks);

}  // namespace groupcoord
