// Namespaced view of another Store (see groupcoord/prefix_store.h).
#include "groupcoord/prefix_store.h"
#include "groupcoord/default_timeout.h"

#include <utility>

#include "groupcoord/check.h"
#include "store/store_semantics.h"

namespace groupcoord {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : Store(base ? base->timeout() : default_timeout()),
      prefix_(std::move(prefix)),
      base_(std::move(base)) {
  GC_CHECK(base_ != nullptr, "PrefixStore '", prefix_, "': the base store must not be null");
}

PrefixStore::~PrefixStore() = default;

std::string PrefixStore::join(const char* op, const std::string& key) const {
  store_internal::check_key("PrefixStore", op, key);
  return prefix_ + "/" + key;
}

std::vector<std::string> PrefixStore::join_all(const char* op,
                                               const std::vector<std::string>& keys) const {
  std::vector<std::string> joined;
  joined.reserve(keys.size());
  for (const std::string& key : keys) joined.push_back(join(op, key));
  return joined;
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  base_->set(join("set", key), value);
}

Bytes PrefixStore::get(const std::string& key) {
  const std::string joined = join("get", key);
  // The base's get() waits with the base's timeout; honour ours when it differs.
  if (timeout() != base_->timeout()) base_->wait({joined}, timeout());
  return base_->get(joined);
}

std::int64_t PrefixStore::add(const std::string& key, std::int64_t delta) {
  return base_->add(join("add", key), delta);
}

Bytes PrefixStore::compare_set(const std::string& key, const Bytes& expected,
                               const Bytes& desired) {
  return base_->compare_set(join("compare_set", key), expected, desired);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  return base_->check(join_all("check", keys));
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  base_->wait(join_all("wait", keys), timeout);
}

bool PrefixStore::delete_key(const std::string& key) {
  return base_->delete_key(join("delete_key", key));
}

std::int64_t PrefixStore::num_keys() { return base_->num_keys(); }

}  // namespace groupcoord
