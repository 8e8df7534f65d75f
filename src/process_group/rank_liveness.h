// Which world ranks are dead: each rank publishes who it is (boot id, pid namespace, pid, start
// time) in the world store when the world is created; after a failure a survivor checks the
// peers that share its node and pid namespace through /proc, and shares its findings through the
// store so that ranks on other nodes learn them too. A rank on another node whose own node-mates
// are all dead (or that has none) cannot be seen dead this way: docs/elastic.md says what then.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/process_group.h"
#include "groupcoord/store.h"

namespace groupcoord {

/// How often a wait looks for a missing peer's process (a /proc lookup per peer): the
/// shared-memory collectives' waits and the shrink agreement.
inline constexpr std::chrono::milliseconds kDeadPeerCheckInterval{100};

/// This process's pid namespace (inode of /proc/self/ns/pid; 0 when unknown).
std::uint64_t this_pid_namespace();
/// This process's start time (clock ticks since boot, /proc/self/stat).
std::uint64_t this_start_time();
/// True when the process `pid` of pid namespace `pid_ns` that started at `start` no longer runs:
/// gone, a zombie, or its pid now held by a process that started at another time. False when it
/// runs and whenever this process cannot tell (another pid namespace, unknown values).
bool process_gone(std::uint64_t pid_ns, long pid, std::uint64_t start);

/// The liveness records of one world (created collectively with it; cheap).
class RankLiveness {
 public:
  /// Collective over `world` (the world group, `rank` of `world_size`): every rank's identity
  /// reaches every rank in one all_gather, so that dead_ranks() needs no store to judge (the
  /// store's host may be the rank that died). `store` (the world group's own, so that a
  /// renumbered world after a shrink starts with fresh records) carries the findings.
  static std::shared_ptr<RankLiveness> gather(ProcessGroup& world);

  /// World ranks known dead, ascending: those this process sees gone (same node and pid
  /// namespace) plus those any other rank reported through the store when it can be reached.
  /// Publishes its own findings there.
  std::vector<int> dead_ranks();

  /// True when world rank `rank` runs on this node's current boot.
  bool on_this_node(int rank) const;

  /// "boot-id pid-namespace pid start-time" of this process.
  static std::string this_process();
  /// True when `identity` (as this_process() wrote it) names a process of this node and pid
  /// namespace that no longer runs: gone, a zombie, or its pid reused by a younger process.
  static bool known_gone(const std::string& identity);

 private:
  RankLiveness(std::shared_ptr<Store> store, int rank, std::vector<std::string> identities);
  std::string dead_key(int rank) const;

  std::shared_ptr<Store> store_;
  int rank_;
  std::vector<std::string> identities_;  ///< by world rank
};

}  // namespace groupcoord
