// Rendezvous: turns a distributed_init_method plus the launcher environment into this process's
// rank, world size and the world Store that every later group and NCCL id goes through.
//
// How each method finds its peers:
//   tcp://host:port  world rank 0 hosts a TcpStore server on `port`; the others connect to host.
//   env:// + MASTER_ADDR/MASTER_PORT (torchrun, or any launcher when they are set): as tcp://.
//   env:// under mpirun/srun/mpiexec on ONE node with nothing else set: a single-node rendezvous.
//       Rank 0 starts a TcpStore on 127.0.0.1 with an ephemeral port and publishes its address in a
//       FileStore directory that only this job can name:
//         $GROUPCOORD_RENDEZVOUS_DIR (default /tmp/groupcoord-rdzv-<uid>)/
//             <launcher>-<job id>-<ppid>-<ppid start time>-<n>
//       (n counts the rendezvous this process has made, so a second world gets a fresh directory)
//       All ranks of one launch share the launcher's process as parent, so the key is the same for
//       them and different for every other job, including jobs running at the same time and later
//       jobs that reuse a pid. The directory is removed once every rank has connected.
//       Several nodes need MASTER_ADDR/MASTER_PORT or tcp://.
//   file:///path     the FileStore directory `path` is the world store itself (on a shared file
//       system this works across nodes); it must not hold an earlier job's keys.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "groupcoord/default_timeout.h"
#include "groupcoord/launcher_env.h"
#include "groupcoord/store.h"

namespace groupcoord {

class TcpStoreServer;

/// Arguments of rendezvous(); -1 means "take it from the launcher environment".
struct RendezvousOptions {
  std::string init_method = "env://";
  int world_size = -1;
  int rank = -1;
  int local_rank = -1;
  std::chrono::milliseconds timeout = default_timeout();  ///< store waits and connects
};

/// Result of a rendezvous: who this process is and the world store.
struct RendezvousResult {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  bool single_node = false;      ///< every rank is on this node (loopback transport is safe)
  std::string launcher;          ///< as detect_launcher() named it
  std::string description;       ///< e.g. "single-node rendezvous via /tmp/... -> 127.0.0.1:40211"
  std::shared_ptr<Store> store;  ///< the world store (keeps an in-process server alive on rank 0)
  /// World rank whose process serves `store` (0 for tcp:// and env:// without a torch store), or
  /// -1 when no rank of this job does (a file store, torch's or torchrun's store): the one rank a
  /// shrink can never exclude, since every survivor needs the store.
  int store_host_rank = -1;
};

/// Collective over all world ranks: every rank calls it once with matching options.
/// Throws std::invalid_argument for inconsistent or missing rank information, TimeoutError when
/// the peers do not show up within `options.timeout`.
RendezvousResult rendezvous(const RendezvousOptions& options, const EnvLookup& env = process_env());

}  // namespace groupcoord
