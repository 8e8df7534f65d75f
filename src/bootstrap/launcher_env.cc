#include "groupcoord/launcher_env.h"

#include <cstdlib>

#include "bootstrap/env_parse.h"
#include "groupcoord/check.h"

namespace groupcoord {

using bootstrap_detail::env_int;
using bootstrap_detail::env_str;

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

namespace {

// A launcher's rank and size variables come together: one without the other is a broken launch
// (torch raises too), not a world of one.
void check_pair(const EnvLookup& env, const char* rank_name, const char* size_name) {
  const bool has_rank = env(rank_name).has_value();
  const bool has_size = env(size_name).has_value();
  if (has_rank == has_size) return;
  const char* set = has_rank ? rank_name : size_name;
  const char* missing = has_rank ? size_name : rank_name;
  GC_THROW(std::invalid_argument, set, " is set (", env(set).value_or(""), ") but ", missing,
           " is not: a launcher sets both; set ", missing, " or unset ", set);
}

// torchrun and anything else that follows torch.distributed's env:// convention.
bool read_torchrun(const EnvLookup& env, LauncherEnv& out) {
  auto rank = env_int(env, "RANK");
  auto size = env_int(env, "WORLD_SIZE");
  if (!rank || !size) return false;
  out.launcher = "torchrun";
  out.rank = *rank;
  out.world_size = *size;
  out.local_rank = env_int(env, "LOCAL_RANK").value_or(-1);
  out.local_world_size = env_int(env, "LOCAL_WORLD_SIZE").value_or(-1);
  out.job_id = env_str(env, "TORCHELASTIC_RUN_ID");
  return true;
}

bool read_openmpi(const EnvLookup& env, LauncherEnv& out) {
  auto rank = env_int(env, "OMPI_COMM_WORLD_RANK");
  auto size = env_int(env, "OMPI_COMM_WORLD_SIZE");
  if (!rank || !size) return false;
  out.launcher = "openmpi";
  out.rank = *rank;
  out.world_size = *size;
  out.local_rank = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(-1);
  out.local_world_size = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(-1);
  // PMIX_NAMESPACE names the job under Open MPI 4/5; the ess job id is the older spelling.
  out.job_id = env_str(env, "PMIX_NAMESPACE");
  if (out.job_id.empty()) out.job_id = env_str(env, "OMPI_MCA_ess_base_jobid");
  return true;
}

bool read_mpich(const EnvLookup& env, LauncherEnv& out) {
  auto rank = env_int(env, "PMI_RANK");
  auto size = env_int(env, "PMI_SIZE");
  if (!rank || !size) return false;
  out.launcher = "mpich";
  out.rank = *rank;
  out.world_size = *size;
  out.local_rank = env_int(env, "MPI_LOCALRANKID").value_or(-1);
  out.local_world_size = env_int(env, "MPI_LOCALNRANKS").value_or(-1);
  out.job_id = env_str(env, "PMI_KVSNAME");
  return true;
}

bool read_slurm(const EnvLookup& env, LauncherEnv& out) {
  auto rank = env_int(env, "SLURM_PROCID");
  auto size = env_int(env, "SLURM_NTASKS");
  if (!rank || !size) return false;
  out.launcher = "slurm";
  out.rank = *rank;
  out.world_size = *size;
  out.local_rank = env_int(env, "SLURM_LOCALID").value_or(-1);
  auto nodes = env_int(env, "SLURM_NNODES");
  if (!nodes) nodes = env_int(env, "SLURM_JOB_NUM_NODES");
  // SLURM_NTASKS_PER_NODE may be a list like "2(x3)"; only the one-node case matters here.
  if (nodes && *nodes == 1) out.local_world_size = *size;
  std::string job = env_str(env, "SLURM_JOB_ID");
  std::string step = env_str(env, "SLURM_STEP_ID");
  out.job_id = step.empty() ? job : job + "." + step;
  return true;
}

}  // namespace

LauncherEnv detect_launcher(const EnvLookup& env) {
  check_pair(env, "RANK", "WORLD_SIZE");
  check_pair(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  check_pair(env, "PMI_RANK", "PMI_SIZE");
  LauncherEnv out;
  if (!read_torchrun(env, out) && !read_openmpi(env, out) && !read_mpich(env, out)) {
    read_slurm(env, out);
  }
  out.master_addr = env_str(env, "MASTER_ADDR");
  out.master_port = env_int(env, "MASTER_PORT").value_or(-1);
  return out;
}

}  // namespace groupcoord
