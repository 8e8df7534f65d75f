// Detects which launcher started this process and what it says about rank and world size.
// Order (docs/architecture.md): torchrun (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT), Open
// MPI (OMPI_COMM_WORLD_*), MPICH/Hydra (PMI_RANK/PMI_SIZE), Slurm (SLURM_PROCID/SLURM_NTASKS/...).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace groupcoord {

/// Looks up an environment variable; std::nullopt when unset. Tests inject fake environments.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

/// The real process environment (getenv).
EnvLookup process_env();

/// What the launcher told this process. Fields the launcher does not provide stay at -1 / empty.
struct LauncherEnv {
  std::string launcher = "none";  ///< "torchrun", "openmpi", "mpich", "slurm" or "none"
  int rank = -1;                  ///< world rank
  int world_size = -1;
  int local_rank = -1;        ///< rank among the processes of this node
  int local_world_size = -1;  ///< processes on this node
  std::string job_id;         ///< launcher job identifier (may be empty)
  std::string master_addr;    ///< MASTER_ADDR, when set
  int master_port = -1;       ///< MASTER_PORT, when set

  /// True when the launcher says every rank runs on this node.
  bool single_node() const { return local_world_size > 0 && local_world_size == world_size; }
  /// True when some launcher variables were found.
  bool detected() const { return launcher != "none"; }
};

/// Reads the launcher variables. Malformed numbers throw std::invalid_argument naming the variable.
LauncherEnv detect_launcher(const EnvLookup& env = process_env());

}  // namespace groupcoord
