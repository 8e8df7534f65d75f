// Rendezvous with every rank as a thread of this process. Threads share the parent process, so
// the single-node rendezvous's job key agrees across them exactly as it does across mpirun ranks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include "fake_env.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/rendezvous.h"
#include "groupcoord/tcp_store.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using testing::fake_env;
using testing::run_ranks_on_threads;
using testing::TempDir;

// A port that was free a moment ago (the kernel hands out ephemeral ports round-robin, so an
// immediate reuse by somebody else is unlikely).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Every rank writes its own key and reads every other rank's through the world store.
void exchange_through_store(const RendezvousResult& result) {
  result.store->set("hello/" + std::to_string(result.rank), "from " + std::to_string(result.rank));
  for (int r = 0; r < result.world_size; ++r) {
    EXPECT_EQ(result.store->get("hello/" + std::to_string(r)), "from " + std::to_string(r));
  }
  // Rank 0 hosts the server (tcp/env): it must stay up until every other rank is done with it.
  result.store->set("hello/finished/" + std::to_string(result.rank), "1");
  if (result.rank != 0) return;
  for (int r = 0; r < result.world_size; ++r)
    result.store->wait({"hello/finished/" + std::to_string(r)});
}

TEST(RendezvousThreads, TcpInitMethod) {
  const int world = 4;
  const int port = free_port();
  run_ranks_on_threads(world, [&](int rank) {
    RendezvousOptions options;
    options.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    options.world_size = world;
    options.rank = rank;
    options.timeout = std::chrono::seconds(30);
    RendezvousResult result = rendezvous(options, fake_env({}));
    EXPECT_EQ(result.rank, rank);
    EXPECT_EQ(result.world_size, world);
    EXPECT_TRUE(result.single_node);  // a loopback master implies one node
    EXPECT_EQ(result.local_rank, rank);
    exchange_through_store(result);
  });
}

TEST(RendezvousThreads, FileInitMethod) {
  TempDir dir;
  const int world = 3;
  run_ranks_on_threads(world, [&](int rank) {
    RendezvousOptions options;
    options.init_method = "file://" + dir.path() + "/store";
    options.world_size = world;
    options.rank = rank;
    options.timeout = std::chrono::seconds(30);
    RendezvousResult result = rendezvous(options, fake_env({}));
    EXPECT_EQ(result.world_size, world);
    exchange_through_store(result);
  });
}

TEST(RendezvousThreads, EnvWithMasterAddrLikeTorchrun) {
  const int world = 2;
  const std::string port = std::to_string(free_port());
  run_ranks_on_threads(world, [&](int rank) {
    RendezvousOptions options;
    options.timeout = std::chrono::seconds(30);
    RendezvousResult result = rendezvous(options, fake_env({{"RANK", std::to_string(rank)},
                                                            {"WORLD_SIZE", "2"},
                                                            {"LOCAL_RANK", std::to_string(rank)},
                                                            {"MASTER_ADDR", "127.0.0.1"},
                                                            {"MASTER_PORT", port}}));
    EXPECT_EQ(result.launcher, "torchrun");
    EXPECT_EQ(result.rank, rank);
    EXPECT_TRUE(result.single_node);
    exchange_through_store(result);
  });
}

std::map<std::string, std::string> open_mpi_env(int rank, int size, const std::string& rdzv_dir,
                                                const std::string& job) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(size)},
          {"PMIX_NAMESPACE", job},
          {"GROUPCOORD_RENDEZVOUS_DIR", rdzv_dir}};
}

bool directory_is_empty(const std::string& path) {
  return std::filesystem::is_empty(std::filesystem::path(path));
}

TEST(RendezvousThreads, SingleNodeMpirunWithNothingElseSetCleansUp) {
  TempDir dir;
  const int world = 4;
  run_ranks_on_threads(world, [&](int rank) {
    RendezvousOptions options;
    options.timeout = std::chrono::seconds(30);
    RendezvousResult result =
        rendezvous(options, fake_env(open_mpi_env(rank, world, dir.path(), "job7")));
    EXPECT_EQ(result.launcher, "openmpi");
    EXPECT_TRUE(result.single_node);
    EXPECT_NE(result.description.find(dir.path()), std::string::npos) << result.description;
    exchange_through_store(result);
  });
  EXPECT_TRUE(directory_is_empty(dir.path())) << "the rendezvous directory was left behind";
}

// The single-node store requires a token that only this user can read: the rendezvous directory
// is made private (0700) even when it existed with wider permissions, a client without the token
// is refused, and GROUPCOORD_STORE_TOKEN from the launcher is the one required when given.
TEST(RendezvousThreads, SingleNodeStoreRequiresTheJobsToken) {
  TempDir dir;
  const std::string base = dir.path() + "/rdzv";
  ASSERT_TRUE(std::filesystem::create_directory(base));
  std::filesystem::permissions(base, std::filesystem::perms::all);  // 0777, as a umask might
  for (const std::string& launcher_token : {std::string(), std::string("from-the-launcher")}) {
    run_ranks_on_threads(2, [&](int rank) {
      RendezvousOptions options;
      options.timeout = std::chrono::seconds(30);
      auto env = open_mpi_env(rank, 2, base, "tokens" + launcher_token);
      if (!launcher_token.empty()) env["GROUPCOORD_STORE_TOKEN"] = launcher_token;
      RendezvousResult result = rendezvous(options, fake_env(env));
      auto tcp = std::dynamic_pointer_cast<TcpStore>(result.store);
      ASSERT_NE(tcp, nullptr);
      if (rank == 0) {
        EXPECT_THROW(
            TcpStore("127.0.0.1", tcp->port(), std::chrono::seconds(5), std::chrono::seconds(5)),
            DistributedError)
            << "a client without the token was served";
        if (!launcher_token.empty()) {
          TcpStore("127.0.0.1", tcp->port(), std::chrono::seconds(5), std::chrono::seconds(5),
                   launcher_token)
              .set("with-the-launchers-token", "1");
        }
      }
      exchange_through_store(result);
    });
    const auto mode = std::filesystem::status(base).permissions();
    EXPECT_EQ(mode & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
              std::filesystem::perms::none)
        << "the rendezvous directory is readable by others";
  }
}

TEST(RendezvousThreads, SecondWorldInTheSameJobMeetsFreshly) {
  // The first world stays alive (its store server too) while the same ranks meet again, as a
  // test harness and an engine's own init_distributed_environment do under one mpirun.
  TempDir dir;
  const int world = 3;
  run_ranks_on_threads(world, [&](int rank) {
    RendezvousOptions options;
    options.timeout = std::chrono::seconds(30);
    auto env = fake_env(open_mpi_env(rank, world, dir.path(), "twice"));
    RendezvousResult first = rendezvous(options, env);
    RendezvousResult second = rendezvous(options, env);
    EXPECT_NE(first.description, second.description);
    // The second world's store is not the first one's: a key set in one is absent in the other.
    if (rank == 0) second.store->set("only-in-second", "1");
    second.store->wait({"only-in-second"});
    EXPECT_FALSE(first.store->check({"only-in-second"}));
    exchange_through_store(second);
    exchange_through_store(first);
  });
  EXPECT_TRUE(directory_is_empty(dir.path()));
}

TEST(RendezvousThreads, TwoConcurrentJobsWithDifferentIdsDoNotMix) {
  TempDir dir;
  std::atomic<int> done{0};
  run_ranks_on_threads(4, [&](int thread) {
    const int job = thread / 2;
    const int rank = thread % 2;
    RendezvousOptions options;
    options.timeout = std::chrono::seconds(30);
    RendezvousResult result = rendezvous(
        options, fake_env(open_mpi_env(rank, 2, dir.path(), "job" + std::to_string(job))));
    // Each job writes its id; a mixed-up rendezvous would show the other job's value.
    result.store->set("job/" + std::to_string(rank), std::to_string(job));
    EXPECT_EQ(result.store->get("job/" + std::to_string(1 - rank)), std::to_string(job));
    exchange_through_store(result);
    ++done;
  });
  EXPECT_EQ(done.load(), 4);
}

TEST(RendezvousThreads, WorldSizeOneNeedsNothing) {
  RendezvousOptions options;
  RendezvousResult result = rendezvous(options, fake_env({}));
  EXPECT_EQ(result.rank, 0);
  EXPECT_EQ(result.world_size, 1);
  EXPECT_TRUE(result.single_node);
  result.store->set("k", "v");
  EXPECT_EQ(result.store->get("k"), "v");
}

TEST(RendezvousThreads, MissingPeerTimesOutWithAClearMessage) {
  TempDir dir;
  RendezvousOptions options;
  options.timeout = std::chrono::milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  try {
    rendezvous(options, fake_env(open_mpi_env(1, 2, dir.path(), "lonely")));
    FAIL() << "expected TimeoutError";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Rank 0 waiting for a peer that never comes says every 10 s which ranks are missing (at the
// default log level) and its timeout names them, not the store's keys.
TEST(RendezvousThreads, RankZeroWaitingForAPeerSaysWhoIsMissing) {
  TempDir dir;
  const std::string log_path = dir.path() + "/stderr";
  const int port = free_port();
  RendezvousOptions options;
  options.init_method = "tcp://127.0.0.1:" + std::to_string(port);
  options.world_size = 3;
  options.rank = 0;
  options.timeout = std::chrono::milliseconds(10500);  // one progress line, then the timeout
  set_log_level(LogLevel::Warn);
  std::string message;
  std::fflush(stderr);
  const int saved_stderr = ::dup(2);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(log_fd, 2);
  std::thread rank_two([&] {
    // Rank 2 joins (and leaves at once: only rank 0 waits); rank 1 never does.
    RendezvousOptions joiner = options;
    joiner.rank = 2;
    try {
      rendezvous(joiner, fake_env({}));
    } catch (const std::exception&) {
    }
  });
  try {
    rendezvous(options, fake_env({}));
  } catch (const TimeoutError& e) {
    message = e.what();
  }
  rank_two.join();
  std::fflush(stderr);
  ::dup2(saved_stderr, 2);
  ::close(saved_stderr);
  ::close(log_fd);
  EXPECT_NE(message.find("rank(s) [1] of 3 never joined"), std::string::npos) << message;
  EXPECT_EQ(message.find("groupcoord/rendezvous"), std::string::npos) << "names a store key";
  std::ifstream log(log_path);
  const std::string logged((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(logged.find("waiting for rank(s) [1] of 3 at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << logged;
}

TEST(RendezvousThreads, BadArgumentsAreRejected) {
  RendezvousOptions options;
  options.world_size = 4;  // several ranks, but no launcher and no master address
  options.rank = 0;
  EXPECT_THROW(rendezvous(options, fake_env({})), std::invalid_argument);

  RendezvousOptions out_of_range;
  out_of_range.init_method = "tcp://127.0.0.1:1";
  out_of_range.world_size = 2;
  out_of_range.rank = 2;
  EXPECT_THROW(rendezvous(out_of_range, fake_env({})), std::invalid_argument);

  RendezvousOptions disagree;
  disagree.world_size = 3;
  EXPECT_THROW(rendezvous(disagree, fake_env(open_mpi_env(0, 2, "/tmp", "x"))),
               std::invalid_argument);

  // Two nodes under mpirun with no master address: the file trick cannot work across nodes.
  auto two_nodes = open_mpi_env(0, 4, "/tmp", "y");
  two_nodes["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
  try {
    rendezvous(RendezvousOptions{}, fake_env(two_nodes));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace groupcoord
