// Logger: level parsing, line format, filtering, thread safety, and GROUPCOORD_LOG_LEVEL read by
// a fresh process (this binary re-executed with a gtest filter).
#include "groupcoord/logging.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace groupcoord {
namespace {

/// Redirects fd 2 into a temporary file for its lifetime; text() returns what was written.
class CaptureStderr {
 public:
  CaptureStderr() {
    char path[] = "/tmp/gc_log_XXXXXX";
    const int fd = ::mkstemp(path);
    path_ = path;
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~CaptureStderr() {
    restore();
    ::unlink(path_.c_str());
  }
  std::string text() {
    restore();
    std::ifstream in(path_);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }

 private:
  void restore() {
    if (saved_ >= 0) {
      ::dup2(saved_, STDERR_FILENO);
      ::close(saved_);
      saved_ = -1;
    }
  }
  std::string path_;
  int saved_ = -1;
};

/// Puts the global logger state back after each test.
class Logging : public ::testing::Test {
 protected:
  void TearDown() override {
    set_log_level(LogLevel::Warn);
    set_log_rank(-1);
  }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(Logging, ParseNamesAndNumbers) {
  EXPECT_EQ(parse_log_level("trace"), LogLevel::Trace);
  EXPECT_EQ(parse_log_level("DEBUG"), LogLevel::Debug);
  EXPECT_EQ(parse_log_level(" Info\n"), LogLevel::Info);
  EXPECT_EQ(parse_log_level("warn"), LogLevel::Warn);
  EXPECT_EQ(parse_log_level("warning"), LogLevel::Warn);
  EXPECT_EQ(parse_log_level("error"), LogLevel::Error);
  EXPECT_EQ(parse_log_level("off"), LogLevel::Off);
  EXPECT_EQ(parse_log_level("0"), LogLevel::Trace);
  EXPECT_EQ(parse_log_level("2"), LogLevel::Info);
  EXPECT_EQ(parse_log_level("5"), LogLevel::Off);
}

TEST_F(Logging, ParseRejectsUnknown) {
  for (const char* bad : {"", "verbose", "6", "-1", "10", "warnx", "in fo"}) {
    EXPECT_THROW(parse_log_level(bad), std::invalid_argument) << bad;
  }
  try {
    parse_log_level("loud");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'loud'"), std::string::npos) << e.what();
  }
}

TEST_F(Logging, LineFormatWithAndWithoutRank) {
  set_log_level(LogLevel::Info);
  CaptureStderr capture;
  set_log_rank(3);
  log_message(LogLevel::Warn, "store: retrying");
  set_log_rank(-1);
  GC_LOG(Info, "value=", 42, " name=", "x");
  GC_LOG(Error, "bad");
  const std::string pid = std::to_string(::getpid());
  EXPECT_EQ(capture.text(), "[groupcoord W rank=3 pid=" + pid + "] store: retrying\n" +
                                "[groupcoord I pid=" + pid + "] value=42 name=x\n" +
                                "[groupcoord E pid=" + pid + "] bad\n");
}

TEST_F(Logging, LinesBelowTheLevelAreDroppedUnevaluated) {
  set_log_level(LogLevel::Error);
  EXPECT_EQ(log_level(), LogLevel::Error);
  int evaluated = 0;
  auto side_effect = [&] { return ++evaluated; };
  CaptureStderr capture;
  GC_LOG(Warn, "hidden ", side_effect());
  GC_LOG(Debug, "hidden ", side_effect());
  log_message(LogLevel::Info, "hidden");
  GC_LOG(Error, "shown ", side_effect());
  set_log_level(LogLevel::Off);
  GC_LOG(Error, "hidden ", side_effect());
  const std::vector<std::string> lines = lines_of(capture.text());
  EXPECT_EQ(evaluated, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("] shown 1"), std::string::npos) << lines[0];
  // Trace lets everything through, with its own letter.
  set_log_level(LogLevel::Trace);
  CaptureStderr capture2;
  GC_LOG(Trace, "t");
  GC_LOG(Debug, "d");
  const std::vector<std::string> lines2 = lines_of(capture2.text());
  ASSERT_EQ(lines2.size(), 2u);
  EXPECT_EQ(lines2[0].rfind("[groupcoord T ", 0), 0u) << lines2[0];
  EXPECT_EQ(lines2[1].rfind("[groupcoord D ", 0), 0u) << lines2[1];
}

TEST_F(Logging, ConcurrentLinesStayWhole) {
  set_log_level(LogLevel::Info);
  set_log_rank(7);
  constexpr int kThreads = 4;
  constexpr int kLines = 300;
  const std::string payload(200, 'x');
  CaptureStderr capture;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLines; ++i) GC_LOG(Info, "thread ", t, " line ", i, " ", payload);
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<std::string> lines = lines_of(capture.text());
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kThreads * kLines));
  const std::string prefix = "[groupcoord I rank=7 pid=" + std::to_string(::getpid()) + "] thread ";
  std::vector<int> next(kThreads, 0);
  for (const std::string& line : lines) {
    ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
    std::istringstream rest(line.substr(prefix.size()));
    int t = -1, i = -1;
    std::string word, tail;
    rest >> t >> word >> i >> tail;
    ASSERT_TRUE(t >= 0 && t < kThreads) << line;
    EXPECT_EQ(i, next[t]++) << line;  // each thread's lines arrive whole and in order
    EXPECT_EQ(tail, payload) << line;
  }
}

// ---- GROUPCOORD_LOG_LEVEL in a fresh process ------------------------------------------------

/// Runs this test binary again with only LoggingEnvChild.Report enabled, GROUPCOORD_LOG_LEVEL
/// set to `env_value` (or unset) and GC_TEST_EXPECT_LEVEL to the level it must see. Returns
/// the child's exit status and stores its stderr in `child_stderr`.
int run_child(const char* env_value, LogLevel expected, std::string* child_stderr) {
  char path[] = "/tmp/gc_log_child_XXXXXX";
  const int err_fd = ::mkstemp(path);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    if (env_value) {
      ::setenv("GROUPCOORD_LOG_LEVEL", env_value, 1);
    } else {
      ::unsetenv("GROUPCOORD_LOG_LEVEL");
    }
    ::setenv("GC_TEST_EXPECT_LEVEL", std::to_string(static_cast<int>(expected)).c_str(), 1);
    char filter[] = "--gtest_filter=LoggingEnvChild.Report";
    char* argv[] = {const_cast<char*>("/proc/self/exe"), filter, nullptr};
    ::execv("/proc/self/exe", argv);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  *child_stderr = buffer.str();
  ::close(err_fd);
  ::unlink(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(LoggingEnvChild, Report) {
  const char* expected = std::getenv("GC_TEST_EXPECT_LEVEL");
  if (expected == nullptr) GTEST_SKIP() << "only meaningful when run by LoggingEnv tests";
  EXPECT_EQ(static_cast<int>(log_level()), std::atoi(expected));
  // Read once: changing the variable afterwards has no effect.
  ::setenv("GROUPCOORD_LOG_LEVEL", "trace", 1);
  EXPECT_EQ(static_cast<int>(log_level()), std::atoi(expected));
  log_message(LogLevel::Error, "child-error-line");
}

TEST(LoggingEnv, VariableIsReadByAFreshProcess) {
  struct Case {
    const char* value;
    LogLevel expected;
  };
  const Case cases[] = {
      {nullptr, LogLevel::Warn}, {"debug", LogLevel::Debug}, {"ERROR", LogLevel::Error},
      {"0", LogLevel::Trace},    {"", LogLevel::Warn},       {"off", LogLevel::Off},
  };
  for (const Case& c : cases) {
    std::string err;
    EXPECT_EQ(run_child(c.value, c.expected, &err), 0) << (c.value ? c.value : "(unset)") << err;
    const bool error_shown = c.expected != LogLevel::Off;
    EXPECT_EQ(err.find("] child-error-line") != std::string::npos, error_shown) << err;
  }
}

TEST(LoggingEnv, MalformedVariableWarnsAndFallsBackToWarn) {
  std::string err;
  EXPECT_EQ(run_child("chatty", LogLevel::Warn, &err), 0) << err;
  EXPECT_NE(err.find("GROUPCOORD_LOG_LEVEL='chatty'"), std::string::npos) << err;
}

}  // namespace
}  // namespace groupcoord
