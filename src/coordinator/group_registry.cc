#include "coordinator/group_registry.h"

#include <atomic>
#include <map>
#include <mutex>

namespace groupcoord {
namespace coordinator_detail {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, int> name_counts;
  std::map<std::string, GroupCoordinator*> live;
  std::atomic<std::uint64_t> generation{0};
};

// Leaked on purpose: coordinators owned by static objects may unregister during static
// destruction, after a function-local registry would already be gone.
Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
}

}  // namespace

std::string make_unique_name(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const int n = r.name_counts[name]++;
  return name + ":" + std::to_string(n);
}

void register_group(const std::string& unique_name, GroupCoordinator* group) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.live[unique_name] = group;
}

void unregister_group(const std::string& unique_name, const GroupCoordinator* group) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.find(unique_name);
  if (it != r.live.end() && it->second == group) {
    r.live.erase(it);
    r.generation.fetch_add(1, std::memory_order_release);
  }
}

GroupCoordinator* find_group(const std::string& unique_name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.find(unique_name);
  return it == r.live.end() ? nullptr : it->second;
}

std::uint64_t registry_generation() {
  return registry().generation.load(std::memory_order_acquire);
}

}  // namespace coordinator_detail
}  // namespace groupcoord
