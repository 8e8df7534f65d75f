// Names a directory that only the ranks of one launch can compute, for the single-node
// rendezvous (see rendezvous.h).
#pragma once

#include <string>

#include "groupcoord/launcher_env.h"

namespace groupcoord {
namespace bootstrap_detail {

/// "<launcher>-<job id>-<ppid>-<ppid start time>", with unsafe characters replaced by '_'.
/// The parent (mpirun, slurmstepd, hydra_pmi_proxy) is shared by all ranks of one launch on a
/// node; its start time makes the key unique even after pid reuse.
std::string single_node_job_key(const LauncherEnv& launcher);

/// Base folder of single-node rendezvous directories: $GROUPCOORD_RENDEZVOUS_DIR, else
/// /tmp/groupcoord-rdzv-<uid> (per user, so users never share or block each other's files).
std::string rendezvous_base_dir(const EnvLookup& env);

}  // namespace bootstrap_detail
}  // namespace groupcoord
