// Dead ranks, the way a job meets them: each test forks the ranks of a small job (no mpirun, which
// would take the whole job down with the killed rank), lets them rendezvous as mpirun's children
// do on one node (env://, the single-node rendezvous directory), drives them to a point, SIGKILLs
// one rank from outside and then checks what the issue promises:
//   - every survivor raises DistributedError or TimeoutError within the group's timeout + 5 s
//     (counted from the kill, or from its own start for a rank that joins after the death) and
//     exits cleanly (its exit code says which error it caught);
//   - nothing of the job is left in /dev/shm (a segment name carries its creator's pid) or in the
//     rendezvous directory;
//   - a new job on the same rendezvous directory and job id then runs.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "forked_job.h"
#include "groupcoord/errors.h"
#include "groupcoord/group_coordinator.h"
#include "groupcoord/message_queue.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/process_group.h"
#include "groupcoord/tensor.h"
#include "groupcoord/work.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using testing::expect_empty;
using testing::expect_no_segments_of;
using testing::Job;
using testing::kCompleted;
using testing::kDistributedError;
using testing::kTimeoutError;
using testing::outcome_name;

// The job's timeout (Job's default): short, so that the suite stays quick.
constexpr auto kTimeout = 3s;
// What the issue allows past the timeout.
constexpr auto kSlack = 5s;

// Expects rank `rank` to raise within the timeout + slack counted from `since`.
void expect_raises(Job& job, int rank, Clock::time_point since) {
  const int outcome = job.wait_exit(rank, since + kTimeout + kSlack);
  const double seconds = std::chrono::duration<double>(Clock::now() - since).count();
  std::printf("[fault test] rank %d: %s after %.1f s\n", rank, outcome_name(outcome), seconds);
  EXPECT_TRUE(outcome == kTimeoutError || outcome == kDistributedError)
      << "rank " << rank << ": " << outcome_name(outcome) << " (exit " << outcome << ")";
}

// A new 2-rank job on the same rendezvous directory and job id: it must rendezvous, reduce and
// end normally.
void expect_a_new_job_runs(const std::string& base, const std::string& id) {
  Job job(base, id, 2);
  const auto work = [](Job&, int) {
    std::vector<float> x(16, 1.0f);
    get_world_group().cpu_group()->all_reduce(x.data(), x.size(), DType::Float32);
    get_world_group().barrier();
  };
  for (int r = 0; r < 2; ++r) job.start(r, work);
  const auto deadline = Clock::now() + kTimeout + kSlack;
  for (int r = 0; r < 2; ++r) {
    const int outcome = job.wait_exit(r, deadline);
    EXPECT_EQ(outcome, kCompleted) << "the next job's rank " << r << ": " << outcome_name(outcome);
  }
}

// What every test checks after the kill: the leftovers, then a new job on the same paths.
void expect_clean_and_reusable(Job& job, const std::string& base, const std::string& id) {
  expect_no_segments_of(job.all_pids());
  expect_empty(job.rendezvous_dir() + "/");
  expect_a_new_job_runs(base, id);
}

class DeadRank : public ::testing::Test {
 protected:
  // A job id of this test alone (the next job reuses it, as a relaunch would).
  std::string id() const {
    return std::string("fault-") + ::testing::UnitTest::GetInstance()->current_test_info()->name() +
           "-" + std::to_string(::getpid());
  }
  groupcoord::testing::TempDir dir_;
};

// Every rank reduces in a loop on the world's CPU group (shared memory on one node).
void reduce_forever(Job& job, int rank) {
  std::vector<float> x(1 << 16, 1.0f);
  ProcessGroup& cpu = *get_world_group().cpu_group();
  cpu.all_reduce(x.data(), x.size(), DType::Float32);
  job.at(rank, "working");
  for (;;) cpu.all_reduce(x.data(), x.size(), DType::Float32);
}

TEST_F(DeadRank, KilledDuringACollective) {
  Job job(dir_.path(), id(), 3);
  for (int r = 0; r < 3; ++r) job.start(r, reduce_forever);
  ASSERT_TRUE(job.wait_for(1, "working"));
  const auto killed = job.kill(1);
  expect_raises(job, 0, killed);
  expect_raises(job, 2, killed);
  expect_clean_and_reusable(job, dir_.path(), id());
}

TEST_F(DeadRank, RankZeroKilledWhileItHostsTheStore) {
  Job job(dir_.path(), id(), 3);
  for (int r = 0; r < 3; ++r) job.start(r, reduce_forever);
  ASSERT_TRUE(job.wait_for(0, "working"));
  const auto killed = job.kill(0);
  expect_raises(job, 1, killed);
  expect_raises(job, 2, killed);
  expect_clean_and_reusable(job, dir_.path(), id());
}

// Over Gloo (shared memory off), a rank that is not a ring neighbour of the dead one learns of the
// failure from a neighbour that broke, which closes its connections: well before its own deadline.
// The survivors stay alive after their error (as an engine that shrinks does), so that no exit
// closes the connections for them.
TEST_F(DeadRank, AFailureSpreadsOverGlooBeforeTheTimeout) {
  groupcoord::testing::ScopedEnv gloo_only("GROUPCOORD_CPU_SHM", "0");
  Job job(dir_.path(), id(), 4);
  const auto body = [](Job& j, int rank) {
    try {
      reduce_forever(j, rank);
    } catch (const DistributedError&) {
      j.at(rank, "raised");
      std::this_thread::sleep_for(2s);  // the others hear of it from this rank before it exits
      throw;
    }
  };
  for (int r = 0; r < 4; ++r) job.start(r, body);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(job.wait_for(r, "working"));
  const auto killed = job.kill(3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(job.wait_for(r, "raised",
                             std::chrono::duration_cast<std::chrono::seconds>(kTimeout + kSlack)));
    const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
    std::printf("[fault test] rank %d raised %.2f s after the kill\n", r, seconds);
    EXPECT_LT(seconds, 1.5) << "rank " << r << " waited for its deadline (" << kTimeout.count()
                            << " s) instead of hearing of the failure";
  }
  for (int r = 0; r < 3; ++r) expect_raises(job, r, killed);
  expect_clean_and_reusable(job, dir_.path(), id());
}

// A group that breaks closes its connections; its own transfers still pending on them (here an
// irecv from a live rank) must end at once with the break named, not wait for their deadline
// (they did, 3 s, while the pairs were closed under them).
TEST_F(DeadRank, PendingTransfersOfABrokenGroupEndAtOnce) {
  groupcoord::testing::ScopedEnv gloo_only("GROUPCOORD_CPU_SHM", "0");
  Job job(dir_.path(), id(), 3);
  const auto body = [](Job& j, int rank) {
    ProcessGroup& cpu = *get_world_group().cpu_group();
    if (rank != 0) {
      j.at(rank, "idle");
      std::this_thread::sleep_for(kTimeout + kSlack);  // rank 2 is killed; rank 1 never sends
      return;
    }
    std::vector<float> from_1(16), from_2(16);
    std::shared_ptr<Work> pending = cpu.irecv(from_1.data(), sizeof(float) * 16, 1, 7);
    j.at(rank, "waiting");
    try {
      cpu.recv(from_2.data(), sizeof(float) * 16, 2, 7);
      Job::fail(rank, "the receive from the killed rank succeeded");
    } catch (const DistributedError&) {
    }
    const auto broke = Clock::now();
    try {
      pending->wait();
      Job::fail(rank, "the pending irecv succeeded on a broken group");
    } catch (const TimeoutError& e) {
      Job::fail(rank, std::string("the pending irecv waited for its deadline: ") + e.what());
    } catch (const DistributedError& e) {
      if (std::strstr(e.what(), "the group broke") == nullptr) {
        Job::fail(rank,
                  std::string("the pending irecv's error does not name the break: ") + e.what());
      }
    }
    if (Clock::now() - broke > 1s) Job::fail(rank, "the pending irecv took over 1 s to end");
  };
  for (int r = 0; r < 3; ++r) job.start(r, body);
  ASSERT_TRUE(job.wait_for(0, "waiting"));
  ASSERT_TRUE(job.wait_for(2, "idle"));
  std::this_thread::sleep_for(100ms);
  const auto killed = job.kill(2);
  const int outcome = job.wait_exit(0, killed + kTimeout + kSlack);
  EXPECT_EQ(outcome, kCompleted) << "rank 0: " << outcome_name(outcome);
}

void program_sigpipe_handler(int) {}

// Gloo writes to a dead peer's closed socket with writev: SIGPIPE. With the default action that
// ended the process (exit 141 in the test above, now and then); the process group ignores it when
// nobody chose an action, and keeps a handler the program installed.
TEST_F(DeadRank, SigpipeCannotEndARankUnlessTheProgramAskedFor) {
  groupcoord::testing::ScopedEnv gloo_only("GROUPCOORD_CPU_SHM", "0");
  const auto sigpipe_handler = [] {
    struct sigaction current {};
    sigaction(SIGPIPE, nullptr, &current);
    return current.sa_handler;
  };
  struct sigaction original {};
  sigaction(SIGPIPE, nullptr, &original);
  struct RestoreSigpipe {
    const struct sigaction& saved;
    ~RestoreSigpipe() { sigaction(SIGPIPE, &saved, nullptr); }
  } restore{original};
  for (const bool program_handler : {false, true}) {
    struct sigaction action {};
    action.sa_handler = program_handler ? program_sigpipe_handler : SIG_DFL;
    sigaction(SIGPIPE, &action, nullptr);  // the forked ranks inherit it
    Job job(dir_.path(), id() + (program_handler ? "-handler" : "-default"), 2);
    const auto body = [&](Job&, int rank) {
      const auto expected = program_handler ? program_sigpipe_handler : SIG_IGN;
      if (sigpipe_handler() != expected) Job::fail(rank, "SIGPIPE's action is not the expected");
    };
    for (int r = 0; r < 2; ++r) job.start(r, body);
    const auto deadline = Clock::now() + kTimeout + kSlack;
    for (int r = 0; r < 2; ++r) {
      const int outcome = job.wait_exit(r, deadline);
      EXPECT_EQ(outcome, kCompleted) << (program_handler ? "with" : "without")
                                     << " a handler, rank " << r << ": " << outcome_name(outcome);
    }
  }
}

// Ranks 0 and 1 start and wait inside the rendezvous for rank 2; `victim` (0 or 1) dies; rank 2
// starts after the death. Then the survivors must raise, rank 2 within its own timeout.
void expect_survivors_of_a_death_during_rendezvous(Job& job, int victim) {
  const auto nothing = [](Job&, int) {};
  job.start(0, nothing);
  job.start(1, nothing);
  std::this_thread::sleep_for(300ms);
  const auto killed = job.kill(victim);
  std::this_thread::sleep_for(500ms);
  job.start(2, nothing);
  expect_raises(job, 1 - victim, killed);
  expect_raises(job, 2, job.started(2));
}

// Rank 1 dies while the job is still meeting: rank 0 and the late rank 2 must not wait past
// their timeout (a late rank used to wait 5 timeouts inside Gloo's connectFullMesh).
TEST_F(DeadRank, KilledDuringRendezvousBeforeAllJoined) {
  Job job(dir_.path(), id(), 3);
  expect_survivors_of_a_death_during_rendezvous(job, 1);
  expect_clean_and_reusable(job, dir_.path(), id());
}

// Rank 0, the store's host, dies while the job is still meeting: the late rank 2 finds only the
// dead store's address, must give up within its timeout and remove the rendezvous directory,
// which rank 0 would have removed.
TEST_F(DeadRank, RankZeroKilledDuringRendezvous) {
  Job job(dir_.path(), id(), 3);
  expect_survivors_of_a_death_during_rendezvous(job, 0);
  expect_clean_and_reusable(job, dir_.path(), id());
}

// A tensor dictionary in flight from rank 0 to rank 1: the sender dies.
TEST_F(DeadRank, SenderKilledDuringTensorDictSends) {
  Job job(dir_.path(), id(), 2);
  const auto traffic = [](Job& j, int rank) {
    GroupCoordinator& world = get_world_group();
    TensorDict dict = {{"hidden", Tensor::empty({1 << 18}, DType::Float32)},
                       {"meta", Bytes("step")}};
    for (int step = 0;; ++step) {
      if (rank == 0) {
        world.send_tensor_dict(dict, 1);
      } else {
        world.recv_tensor_dict(0);
      }
      if (step == 2) j.at(rank, "working");
    }
  };
  for (int r = 0; r < 2; ++r) job.start(r, traffic);
  ASSERT_TRUE(job.wait_for(1, "working"));
  const auto killed = job.kill(0);
  expect_raises(job, 1, killed);
  expect_clean_and_reusable(job, dir_.path(), id());
}

// The shared-memory broadcast queue (rank 0 writes, ranks 1 and 2 read) losing a reader, then,
// in the next test, its writer.
void queue_traffic(Job& job, int rank) {
  std::shared_ptr<MessageQueue> queue = get_world_group().create_mq_broadcaster(0);
  const Bytes message(64 * 1024, 'm');
  for (int step = 0;; ++step) {
    if (rank == 0) {
      queue->enqueue(message);
    } else {
      queue->dequeue();
    }
    if (step == 8) job.at(rank, "working");
  }
}

// The reader rank 2 dies: the writer (its chunks are never freed, or its connection breaks)
// and the other reader (the writer stops) raise.
void expect_queue_reader_death(Job& job, const std::function<void(Job&, int)>& traffic) {
  for (int r = 0; r < 3; ++r) job.start(r, traffic);
  ASSERT_TRUE(job.wait_for(2, "working"));
  const auto killed = job.kill(2);
  expect_raises(job, 0, killed);
  expect_raises(job, 1, killed);
}

// The writer dies: both readers raise.
void expect_queue_writer_death(Job& job, const std::function<void(Job&, int)>& traffic) {
  for (int r = 0; r < 3; ++r) job.start(r, traffic);
  ASSERT_TRUE(job.wait_for(1, "working"));
  const auto killed = job.kill(0);
  expect_raises(job, 1, killed);
  expect_raises(job, 2, killed);
}

// The same when the readers are served over TCP, as readers on other nodes are
// (GROUPCOORD_MQ_FORCE_REMOTE makes every reader take that path on one machine).
void remote_queue_traffic(Job& job, int rank) {
  ::setenv("GROUPCOORD_MQ_FORCE_REMOTE", "1", 1);
  queue_traffic(job, rank);
}

TEST_F(DeadRank, QueueReaderKilled) {
  Job job(dir_.path(), id(), 3);
  expect_queue_reader_death(job, queue_traffic);
  expect_clean_and_reusable(job, dir_.path(), id());
}

TEST_F(DeadRank, QueueWriterKilled) {
  Job job(dir_.path(), id(), 3);
  expect_queue_writer_death(job, queue_traffic);
  expect_clean_and_reusable(job, dir_.path(), id());
}

TEST_F(DeadRank, RemoteQueueReaderKilled) {
  Job job(dir_.path(), id(), 3);
  expect_queue_reader_death(job, remote_queue_traffic);
  expect_clean_and_reusable(job, dir_.path(), id());
}

TEST_F(DeadRank, RemoteQueueWriterKilled) {
  Job job(dir_.path(), id(), 3);
  expect_queue_writer_death(job, remote_queue_traffic);
  expect_clean_and_reusable(job, dir_.path(), id());
}

}  // namespace
}  // namespace groupcoord
