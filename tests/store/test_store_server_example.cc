// The standalone groupcoord-store-server example: starts on an ephemeral port, prints it,
// serves a TcpStore client, and exits cleanly on SIGTERM.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "groupcoord/tcp_store.h"
#include "store_test_util.h"

extern char** environ;

namespace groupcoord {
namespace {

using namespace std::chrono_literals;
using store_test::Clock;

/// Reads one line from `fd` within `timeout`; empty on timeout or EOF.
std::string read_line(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string line;
  while (Clock::now() < deadline) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    char c = 0;
    if (::read(fd, &c, 1) != 1) break;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return std::string();
}

/// Waits up to `timeout` for `pid`; kills it if it overstays. Returns the exit code or -1.
int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(StoreServerExample, ServesUntilSigterm) {
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  const char* argv[] = {GROUPCOORD_STORE_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, const_cast<char**>(argv), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);

  const std::string line = read_line(out[0], 10s);
  ::close(out[0]);
  const int port = line.empty() ? 0 : std::stoi(line);
  if (port > 0) {
    TcpStore store("127.0.0.1", port, 5s, 5s);
    store.set("k", "v");
    EXPECT_EQ(store.get("k"), "v");
    EXPECT_EQ(store.add("n", 2), 2);
  } else {
    ADD_FAILURE() << "the server printed no port";
  }
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid, 10s), 0);
}

TEST(StoreServerExample, RejectsBadArguments) {
  const char* argv[] = {GROUPCOORD_STORE_SERVER_BIN, "--port", "99999", nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, const_cast<char**>(argv), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(wait_exit(pid, 10s), 2);
}

}  // namespace
}  // namespace groupcoord
