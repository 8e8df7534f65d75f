// A namespaced view of another Store: every key becomes `prefix + "/" + key`. Each process
// group rendezvouses under its own prefix so that groups never see each other's keys.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/store.h"

namespace groupcoord {

/// Store that prepends `prefix + "/"` to every key and forwards to a shared base store.
/// Prefixes nest: PrefixStore("b", PrefixStore("a", base)) writes "a/b/key" in `base`.
/// Thread-safe when the base store is.
class PrefixStore : public Store {
 public:
  /// A view of `base` under `prefix`. Its timeout() starts as base->timeout(); changing it
  /// with set_timeout() affects this view only. Throws std::invalid_argument for a null base.
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);
  ~PrefixStore() override;

  using Store::wait;
  /// Sets `prefix/key` in the base store.
  void set(const std::string& key, const Bytes& value) override;
  /// The value of `prefix/key`, waiting up to timeout().
  Bytes get(const std::string& key) override;
  /// Atomic add on `prefix/key`.
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  /// Atomic compare-and-set on `prefix/key` (c10d semantics, see Store::compare_set).
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  /// True when every `prefix/key` exists now.
  bool check(const std::vector<std::string>& keys) override;
  /// Waits until every `prefix/key` exists.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  /// Deletes `prefix/key`; returns whether it existed.
  bool delete_key(const std::string& key) override;
  /// Number of keys in the whole base store (as in c10d, not only those under the prefix).
  std::int64_t num_keys() override;

  /// The prefix, without the trailing "/".
  const std::string& prefix() const { return prefix_; }
  /// The store this view forwards to.
  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  /// `prefix_ + "/" + key`; throws std::invalid_argument naming `op` for an empty key.
  std::string join(const char* op, const std::string& key) const;
  std::vector<std::string> join_all(const char* op, const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace groupcoord
