// A small job of forked ranks, the way a job meets a dead rank: no mpirun (which would take the
// whole job down with a killed rank); the ranks rendezvous as mpirun's children do on one node
// (env://, the single-node rendezvous directory), a test drives them to a point (markers), kills
// one from outside and then checks how the others end (their exit codes).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace groupcoord {
namespace testing {

/// Exit codes of a rank.
enum Outcome {
  kCompleted = 0,  ///< the body returned without an error
  kTimeoutError = 10,
  kDistributedError = 11,
  kOtherError = 12,
  kCheckFailed = 13,  ///< the body reported a wrong result (Job::fail)
  kNotExited = -1,    ///< still running at the deadline (then killed)
};

/// "TimeoutError", "still running past the deadline", ...
const char* outcome_name(int code);

/// How the ranks of a Job start.
struct JobOptions {
  std::string backend = "gloo";             ///< init_distributed_environment's backend
  std::chrono::milliseconds timeout{3000};  ///< the world's timeout
  bool nccl_host_per_rank = false;          ///< NCCL_HOSTID=h<rank>: several ranks on one GPU
};

/// One job of `world` forked ranks over a rendezvous directory of its own.
class Job {
 public:
  /// `base`: a private directory; `id`: the job id (PMIX_NAMESPACE), reused by a relaunch.
  Job(std::string base, std::string id, int world, JobOptions options = {});
  /// Kills and reaps the ranks still running.
  ~Job();

  /// Starts rank `rank`: it takes the launcher's variables of this job, initialises the world
  /// and runs `body`, which may call at() to tell the test where it is. The body's exceptions
  /// become the exit code (Outcome); destroy_distributed_environment() runs after it.
  void start(int rank, const std::function<void(Job&, int)>& body);

  /// Called in a rank: marks that it reached `name`.
  void at(int rank, const std::string& name) const;
  /// Called in a rank: reports a wrong result and exits with kCheckFailed.
  [[noreturn]] static void fail(int rank, const std::string& what);
  /// Waits (in the test) until rank `rank` reached `name`.
  bool wait_for(int rank, const std::string& name,
                std::chrono::seconds limit = std::chrono::seconds(30)) const;

  /// SIGKILLs rank `rank` and reaps it; returns when.
  std::chrono::steady_clock::time_point kill(int rank);
  /// SIGKILLs rank `rank` without reaping it: it stays a zombie until the test reaps it (the
  /// destructor or wait_exit), as a child of a launcher that has not noticed yet.
  std::chrono::steady_clock::time_point kill_leaving_zombie(int rank);
  /// The outcome of rank `rank` once it exits, or kNotExited (and the rank killed) when it is
  /// still running at `deadline`.
  int wait_exit(int rank, std::chrono::steady_clock::time_point deadline);

  std::chrono::steady_clock::time_point started(int rank) const { return started_[rank]; }
  /// Every process this job started, running or not.
  const std::vector<pid_t>& all_pids() const { return all_pids_; }
  std::string rendezvous_dir() const { return base_ + "/rendezvous"; }

 private:
  std::string markers() const { return base_ + "/markers-" + id_; }
  int run_rank(int rank, const std::function<void(Job&, int)>& body);

  std::string base_;
  std::string id_;
  int world_;
  JobOptions options_;
  std::vector<pid_t> pids_;  ///< -1 once reaped
  std::vector<pid_t> all_pids_;
  std::vector<std::chrono::steady_clock::time_point> started_;
};

/// Nothing of these processes in /dev/shm (segment names carry their creator's pid).
void expect_no_segments_of(const std::vector<pid_t>& pids);
/// `dir` is missing or empty.
void expect_empty(const std::string& dir);

}  // namespace testing
}  // namespace groupcoord
