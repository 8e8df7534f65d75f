// Helpers shared by every test binary.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace groupcoord {
namespace testing {

/// A fresh directory under /tmp, removed with its contents when this object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Waits for the forked child `pid` at most `timeout`: its exit code, or -1 when it was killed by
/// a signal or did not exit in time (it is then killed).
int wait_child(int pid, std::chrono::milliseconds timeout);

/// Names in /dev/shm that start with "<prefix><pid>-" for one of `pids` (segments a process made
/// and left behind; e.g. prefix "gccpu-" for the CPU collectives').
std::vector<std::string> shm_segments_of(const std::vector<long>& pids, const std::string& prefix);

/// Runs fn(rank) on `n` threads and joins them; rethrows the first exception any thread threw.
void run_ranks_on_threads(int n, const std::function<void(int rank)>& fn);

/// Sets (or, with std::nullopt, unsets) an environment variable for this object's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_value_;
};

/// Removes a file or directory tree; missing paths are fine.
void remove_tree(const std::string& path);

/// Expects `fn` to throw an exception of type E whose message contains each of `parts` (the
/// group name, the op, the offending value, ...).
template <typename E>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    std::string wanted;
    for (const auto& part : parts) wanted += " '" + part + "'";
    ADD_FAILURE() << "expected an exception containing" << wanted;
  } catch (const E& e) {
    const std::string what = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' not in: " << what;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

/// expect_error<std::invalid_argument>: bad input must name what was wrong.
inline void expect_invalid_argument(const std::function<void()>& fn,
                                    const std::vector<std::string>& parts) {
  expect_error<std::invalid_argument>(fn, parts);
}

}  // namespace testing
}  // namespace groupcoord
