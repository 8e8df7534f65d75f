// The key-value store that every rendezvous goes through (Gloo contexts, NCCL unique ids,
// launcher handshakes). Modelled on torch c10d's Store; gloo::rendezvous::Store is adapted to it
// internally (src/store/gloo_store_adapter.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "groupcoord/bytes.h"
#include "groupcoord/default_timeout.h"

namespace groupcoord {

/// Abstract key-value store shared by all ranks of a job. Thread-safe: one Store object may be
/// used from several threads at once. Every wait is bounded by a deadline.
class Store {
 public:
  /// Timeout used by get() and wait() when no explicit timeout is given.
  static constexpr std::chrono::milliseconds kDefaultTimeout = kBuiltinTimeout;

  explicit Store(std::chrono::milliseconds timeout = default_timeout()) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Sets `key` to `value`, replacing any previous value, and wakes its waiters.
  virtual void set(const std::string& key, const Bytes& value) = 0;
  /// Returns the value of `key`, waiting up to timeout() for it to be set.
  /// Throws TimeoutError naming the key when it does not appear in time.
  virtual Bytes get(const std::string& key) = 0;
  /// Atomically adds `delta` to the integer stored at `key` (missing = 0) and returns the result.
  /// The value is kept as decimal text, as in c10d, so get() of a counter reads e.g. "3".
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Atomic compare-and-set, c10d semantics: if `key` is missing and `expected` is empty, or the
  /// current value equals `expected`, stores `desired`. Returns the value held afterwards (or
  /// `expected` when the key is missing and `expected` is not empty).
  virtual Bytes compare_set(const std::string& key, const Bytes& expected,
                            const Bytes& desired) = 0;
  /// True when every key exists now (never waits).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// Waits until every key exists; throws TimeoutError naming the missing keys after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  /// wait() with timeout().
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  /// Deletes `key`; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;
  /// Number of keys currently stored (for a PrefixStore: in the whole underlying store).
  virtual std::int64_t num_keys() = 0;

  /// Default deadline for get() and wait().
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 private:
  std::chrono::milliseconds timeout_;
};

}  // namespace groupcoord
