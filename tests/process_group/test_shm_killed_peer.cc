// A peer killed in the middle of shared-memory collectives: two forked processes form a group
// through a FileStore (no MPI: mpirun would take the whole job down with the killed rank), loop on
// 16 MiB all_reduces, and the test SIGKILLs one of them. The survivor must raise within the
// group's timeout, naming the group and the missing rank: TimeoutError when it was waiting for the
// peer's step, DistributedError when it was reading the peer's buffer directly (single copy) and
// the kernel said the process is gone. No segment of either process may be left in /dev/shm.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/file_store.h"
#include "groupcoord/process_group.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(3);

// Exit codes of a child.
enum ChildExit {
  kRaisedNamingThePeer = 0,  // the survivor's expected end
  kNoSharedMemory = 2,
  kOtherError = 3,
  kWrongMessage = 4,
};

bool exists(const std::string& path) { return std::ifstream(path).good(); }

// A child: joins the group, says it is running, then all_reduces until an error ends it.
[[noreturn]] void run_child(const std::string& dir, int rank) {
  int code = kOtherError;
  try {
    auto store = std::make_shared<FileStore>(dir + "/store", std::chrono::seconds(30));
    ProcessGroupOptions options;
    options.name = "killed-peer";
    options.timeout = kTimeout;
    options.single_node = true;
    auto group = ProcessGroup::create_world(store, rank, 2, options);
    if (!group->uses_shared_memory()) ::_exit(kNoSharedMemory);
    std::vector<float> data(std::size_t{4} << 20, 1.0f);  // 16 MiB: 64 steps of 256 KiB
    group->all_reduce(data.data(), data.size(), DType::Float32);
    std::ofstream(dir + "/running-" + std::to_string(rank)) << "1";
    for (;;) group->all_reduce(data.data(), data.size(), DType::Float32);
  } catch (const DistributedError& e) {  // TimeoutError included
    const std::string message = e.what();
    code = message.find("killed-peer") != std::string::npos &&
                   (message.find("rank(s) 1") != std::string::npos ||
                    message.find("rank 1") != std::string::npos)
               ? kRaisedNamingThePeer
               : kWrongMessage;
    if (code != kRaisedNamingThePeer) std::fprintf(stderr, "survivor's error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child %d: %s\n", rank, e.what());
  }
  ::_exit(code);
}

TEST(ShmKilledPeer, TheSurvivorRaisesWithinTheTimeoutAndNoSegmentIsLeft) {
  // Fork before this process has any thread.
  testing::TempDir dir;
  std::vector<pid_t> children;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) run_child(dir.path(), rank);
    children.push_back(pid);
  }
  const auto wait_start = Clock::now();
  while (!(exists(dir.path() + "/running-0") && exists(dir.path() + "/running-1"))) {
    if (Clock::now() - wait_start > std::chrono::seconds(60)) {
      for (pid_t pid : children) ::kill(pid, SIGKILL);
      FAIL() << "the children did not start their collectives";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // well inside a collective
  ASSERT_EQ(::kill(children[1], SIGKILL), 0);
  const auto killed = Clock::now();
  const int survivor = testing::wait_child(children[0], kTimeout + std::chrono::seconds(10));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed);
  testing::wait_child(children[1], std::chrono::seconds(5));  // reap the killed one
  EXPECT_EQ(survivor, kRaisedNamingThePeer)
      << "exit codes: 2 no shared memory, 3 another error, 4 an error not naming the group and "
         "rank 1, -1 hung";
  EXPECT_LT(took, kTimeout + std::chrono::seconds(2)) << "raised late";
  const std::vector<long> pids(children.begin(), children.end());
  EXPECT_TRUE(testing::shm_segments_of(pids, "gccpu-").empty()) << "a segment was left in /dev/shm";
}

}  // namespace
}  // namespace groupcoord
