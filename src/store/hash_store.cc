// In-memory Store (see groupcoord/hash_store.h).
#include "groupcoord/hash_store.h"

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "store/socket.h"
#include "store/store_semantics.h"

namespace groupcoord {

using store_internal::check_key;

HashStore::HashStore(std::chrono::milliseconds timeout) : Store(timeout) {}

HashStore::~HashStore() = default;

void HashStore::set(const std::string& key, const Bytes& value) {
  check_key("HashStore", "set", key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  check_key("HashStore", "get", key);
  std::unique_lock<std::mutex> lock(mutex_);
  wait_locked(&lock, {key}, timeout(), "get");
  return values_.find(key)->second;
}

std::int64_t HashStore::add(const std::string& key, std::int64_t delta) {
  check_key("HashStore", "add", key);
  std::int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = values_.find(key);
    result =
        store_internal::add_to_counter(key, it == values_.end() ? nullptr : &it->second, delta);
    values_[key] = store_internal::counter_text(result);
  }
  changed_.notify_all();
  return result;
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  check_key("HashStore", "compare_set", key);
  store_internal::CompareSetOutcome outcome;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = values_.find(key);
    outcome = store_internal::decide_compare_set(it == values_.end() ? nullptr : &it->second,
                                                 expected, desired);
    if (outcome.store) values_[key] = desired;
  }
  if (outcome.store) changed_.notify_all();
  return outcome.result;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) check_key("HashStore", "check", key);
  std::lock_guard<std::mutex> lock(mutex_);
  return missing_locked(keys).empty();
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  for (const std::string& key : keys) check_key("HashStore", "wait", key);
  store_internal::check_timeout("HashStore", "wait", timeout);
  std::unique_lock<std::mutex> lock(mutex_);
  wait_locked(&lock, keys, timeout, "wait");
}

void HashStore::wait_locked(std::unique_lock<std::mutex>* lock,
                            const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                            const char* op) {
  const store_internal::TimePoint deadline = store_internal::deadline_after(timeout);
  while (true) {
    std::vector<std::string> missing = missing_locked(keys);
    if (missing.empty()) return;
    if (store_internal::Clock::now() >= deadline) {
      GC_THROW(TimeoutError, "HashStore: ", op, " timed out after ", timeout.count(),
               " ms; missing keys ", store_internal::format_keys(missing));
    }
    changed_.wait_until(*lock, deadline);
  }
}

bool HashStore::delete_key(const std::string& key) {
  check_key("HashStore", "delete_key", key);
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.erase(key) > 0;
}

std::int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<std::int64_t>(values_.size());
}

std::vector<std::string> HashStore::missing_locked(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (values_.find(key) == values_.end()) missing.push_back(key);
  }
  return missing;
}

}  // namespace groupcoord
