// An in-memory Store for ranks that are threads of one process (thread tests, single-process
// jobs). Every thread shares one HashStore object through a std::shared_ptr.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "groupcoord/default_timeout.h"
#include "groupcoord/store.h"

namespace groupcoord {

/// In-memory key-value store guarded by a mutex; waiters sleep on a condition variable and
/// are woken by every write. Thread-safe; not visible to other processes.
class HashStore : public Store {
 public:
  /// An empty store whose get() and wait() give up after `timeout`.
  explicit HashStore(std::chrono::milliseconds timeout = default_timeout());
  ~HashStore() override;

  using Store::wait;
  /// Sets `key` to `value` and wakes waiters. Throws std::invalid_argument for an empty key.
  void set(const std::string& key, const Bytes& value) override;
  /// The value of `key`, waiting up to timeout(); TimeoutError names the key.
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
  /// Number of keys stored.
  std::int64_t num_keys() override;

 private:
  /// Waits on changed_ until every key exists; throws TimeoutError naming `op` and the missing
  /// keys once `timeout` has passed. `lock` holds mutex_.
  void wait_locked(std::unique_lock<std::mutex>* lock, const std::vector<std::string>& keys,
                   std::chrono::milliseconds timeout, const char* op);
  /// Keys of `keys` that are missing; the caller holds mutex_.
  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) const;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<std::string, Bytes> values_;
};

}  // namespace groupcoord
