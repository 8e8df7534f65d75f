#include "coordinator/group_registry.h"

#include <map>
#include <mutex>

namespace groupcoord {
namespace coordinator_detail {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, int> name_counts;
  std::map<std::string, GroupCoordinator*> live;
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
  if (it != r.live.end() && it->second == group) r.live.erase(it);
}

GroupCoordinator* find_group(const std::string& unique_name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.find(unique_name);
  return it == r.live.end() ? nullptr : it->second;
}

}  // namespace coordinator_detail
}  // namespace groupcoord
