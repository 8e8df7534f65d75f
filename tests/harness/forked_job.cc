#include "forked_job.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "groupcoord/errors.h"
#include "groupcoord/parallel_state.h"

namespace groupcoord {
namespace testing {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

/// The exception a failed check inside a rank throws (Job::fail).
struct CheckFailed {
  std::string what;
};

}  // namespace

const char* outcome_name(int code) {
  switch (code) {
    case kCompleted:
      return "completed without an error";
    case kTimeoutError:
      return "TimeoutError";
    case kDistributedError:
      return "DistributedError";
    case kOtherError:
      return "another exception";
    case kCheckFailed:
      return "a wrong result";
    case kNotExited:
      return "still running past the deadline";
    default:
      return "killed or crashed";
  }
}

Job::Job(std::string base, std::string id, int world, JobOptions options)
    : base_(std::move(base)),
      id_(std::move(id)),
      world_(world),
      options_(std::move(options)),
      pids_(world, -1),
      started_(world) {
  std::filesystem::create_directories(markers());
}

Job::~Job() {
  for (pid_t pid : pids_) {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
}

void Job::start(int rank, const std::function<void(Job&, int)>& body) {
  started_[rank] = Clock::now();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid > 0) {
    pids_[rank] = pid;
    all_pids_.push_back(pid);
    return;
  }
  ::_exit(run_rank(rank, body));
}

void Job::at(int rank, const std::string& name) const {
  std::ofstream(markers() + "/" + std::to_string(rank) + "-" + name) << "1";
}

void Job::fail(int rank, const std::string& what) { throw CheckFailed{what}; }

bool Job::wait_for(int rank, const std::string& name, std::chrono::seconds limit) const {
  const std::string path = markers() + "/" + std::to_string(rank) + "-" + name;
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

Clock::time_point Job::kill(int rank) {
  ::kill(pids_[rank], SIGKILL);
  ::waitpid(pids_[rank], nullptr, 0);
  pids_[rank] = -1;
  return Clock::now();
}

Clock::time_point Job::kill_leaving_zombie(int rank) {
  ::kill(pids_[rank], SIGKILL);
  return Clock::now();
}

int Job::wait_exit(int rank, Clock::time_point deadline) {
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pids_[rank], &status, WNOHANG);
    if (done == pids_[rank]) {
      pids_[rank] = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (Clock::now() >= deadline) {
      kill(rank);
      return kNotExited;
    }
    std::this_thread::sleep_for(5ms);
  }
}

int Job::run_rank(int rank, const std::function<void(Job&, int)>& body) {
  // mpirun's variables for a one-node job (the single-node rendezvous), and nothing that would
  // point elsewhere.
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  ::setenv("OMPI_COMM_WORLD_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", std::to_string(world_).c_str(), 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(world_).c_str(), 1);
  ::setenv("PMIX_NAMESPACE", id_.c_str(), 1);
  ::setenv("GROUPCOORD_RENDEZVOUS_DIR", rendezvous_dir().c_str(), 1);
  if (options_.nccl_host_per_rank) ::setenv("NCCL_HOSTID", ("h" + std::to_string(rank)).c_str(), 1);
  try {
    init_distributed_environment(-1, -1, "env://", -1, options_.backend, options_.timeout);
    at(rank, "initialised");
    body(*this, rank);
    destroy_distributed_environment();
    return kCompleted;
  } catch (const CheckFailed& e) {
    std::fprintf(stderr, "[rank %d] wrong result: %s\n", rank, e.what.c_str());
    return kCheckFailed;
  } catch (const TimeoutError& e) {
    std::fprintf(stderr, "[rank %d] TimeoutError: %s\n", rank, e.what());
    return kTimeoutError;
  } catch (const DistributedError& e) {
    std::fprintf(stderr, "[rank %d] DistributedError: %s\n", rank, e.what());
    return kDistributedError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] unexpected exception: %s\n", rank, e.what());
    return kOtherError;
  }
}

void expect_no_segments_of(const std::vector<pid_t>& pids) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    for (pid_t pid : pids) {
      EXPECT_EQ(name.find("-" + std::to_string(pid) + "-"), std::string::npos)
          << "/dev/shm/" << name << " of pid " << pid << " was left behind";
    }
  }
}

void expect_empty(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    ADD_FAILURE() << entry.path() << " was left in the rendezvous directory";
  }
}

}  // namespace testing
}  // namespace groupcoord
