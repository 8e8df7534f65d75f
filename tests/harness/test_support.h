// Helpers shared by every test binary.
#pragma once

#include <functional>
#include <optional>
#include <string>

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

}  // namespace testing
}  // namespace groupcoord
