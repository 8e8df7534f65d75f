// A Store in a directory of a shared file system, for processes of one machine (file:// init)
// and for tests without a server. One file per key; no process is special.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/default_timeout.h"
#include "groupcoord/store.h"

namespace groupcoord {
namespace store_internal {
class DirectoryGate;  // private to src/store/file_store.cc
}  // namespace store_internal

/// Store kept as one file per key in `directory`. Writes are atomic (temporary file + rename),
/// so readers never see a partial value; add, compare_set, set and delete_key are serialized
/// across processes by flock(2) on a lock file in the directory, and across threads of this
/// process by a mutex. Waits poll the directory with backoff (yield, then sleeps of up to
/// ~10 ms) until their deadline. Thread-safe and usable from any number of processes.
class FileStore : public Store {
 public:
  /// Opens (creating it and its parents if needed) the store in `directory`.
  /// Throws std::invalid_argument for an empty path, DistributedError when the directory or its
  /// lock file cannot be created.
  explicit FileStore(std::string directory, std::chrono::milliseconds timeout = default_timeout());
  ~FileStore() override;

  using Store::wait;
  /// Atomically replaces the file of `key` with `value`.
  void set(const std::string& key, const Bytes& value) override;
  /// The value of `key`, waiting up to timeout(); TimeoutError names the key and directory.
  Bytes get(const std::string& key) override;
  /// Atomically adds `delta` to the decimal counter at `key` and returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  /// Atomic compare-and-set with c10d semantics (see Store::compare_set).
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  /// True when every key exists now.
  bool check(const std::vector<std::string>& keys) override;
  /// Waits until every key exists; TimeoutError names the missing keys after `timeout`.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  /// Deletes `key`; returns whether it existed.
  bool delete_key(const std::string& key) override;
  /// Number of keys in the directory.
  std::int64_t num_keys() override;

  /// The directory holding the store.
  const std::string& directory() const { return directory_; }

  /// Removes a store directory and everything in it (no error when it does not exist).
  /// Call it once every process is done with the store. Throws DistributedError on failure.
  static void remove_directory(const std::string& directory);

 private:
  class ExclusiveLock;

  /// Path of the file holding `key` (names are encoded, see file_store.cc).
  std::string key_path(const std::string& key) const;
  /// Writes `value` to a fresh temporary file in the directory and returns its path.
  std::string write_temp(const Bytes& value) const;

  std::string directory_;
  int lock_fd_ = -1;
  /// Shared by every FileStore of this process on the same directory: threads queue on it
  /// (flock(2) alone would not separate threads sharing a descriptor, and polling it is slow),
  /// while flock(2) arbitrates between processes.
  std::shared_ptr<store_internal::DirectoryGate> gate_;
};

}  // namespace groupcoord
