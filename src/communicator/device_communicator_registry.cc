// The string-keyed registry of device communicator factories and, beside it, the backend table
// that maps a coordinator's backend name to one of them (docs/architecture.md: explicit
// registration, no static self-registering objects). register_builtin_device_communicators()
// (group_coordinator.h) lives in the coordinator layer, which knows every built-in ("cpu", and
// "cuda" with CUDA).
#include <map>
#include <mutex>
#include <sstream>

#include "groupcoord/check.h"
#include "groupcoord/device_communicator.h"

namespace groupcoord {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, DeviceCommunicatorFactory> factories;  // sorted by name
  std::map<std::string, BackendInfo> backends;                 // sorted by name
};

// Never destroyed: communicators may be created from static destructors of engine code, and a
// destroyed registry there would be undefined behaviour.
Registry& registry() {
  static Registry* instance = new Registry();
  return *instance;
}

std::string names_str(const std::vector<std::string>& names) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << names[i];
  out << "]";
  return out.str();
}

}  // namespace

void register_device_communicator(const std::string& name, DeviceCommunicatorFactory factory) {
  GC_CHECK(!name.empty(), "register_device_communicator: the name must not be empty");
  GC_CHECK(static_cast<bool>(factory), "register_device_communicator: the factory for '", name,
           "' is empty");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[name] = std::move(factory);
}

bool has_device_communicator(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.factories.count(name) != 0;
}

std::vector<std::string> registered_device_communicators() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  names.reserve(r.factories.size());
  for (const auto& entry : r.factories) names.push_back(entry.first);
  return names;
}

std::unique_ptr<DeviceCommunicator> create_device_communicator(
    const std::string& name, const DeviceCommunicatorContext& context) {
  DeviceCommunicatorFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) factory = it->second;
  }
  GC_CHECK(static_cast<bool>(factory), context.unique_name,
           " create_device_communicator: unknown device communicator '", name,
           "'; registered: ", names_str(registered_device_communicators()));
  // The factory runs without the lock: it may itself look up or register communicators.
  std::unique_ptr<DeviceCommunicator> communicator = factory(context);
  GC_CHECK(communicator != nullptr, context.unique_name,
           " create_device_communicator: the factory registered as '", name,
           "' returned no communicator");
  return communicator;
}

void register_backend(BackendInfo info) {
  GC_CHECK(!info.name.empty(), "register_backend: the name must not be empty");
  GC_CHECK(!info.communicator.empty(), "register_backend: backend '", info.name,
           "' names no device communicator");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string name = info.name;
  r.backends[name] = std::move(info);
}

bool has_backend(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.backends.count(name) != 0;
}

std::vector<std::string> registered_backends() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  names.reserve(r.backends.size());
  for (const auto& entry : r.backends) names.push_back(entry.first);
  return names;
}

BackendInfo find_backend(const std::string& name, const std::string& what) {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.backends.find(name);
    if (it != r.backends.end()) return it->second;
  }
  GC_THROW(std::invalid_argument, what, ": unknown backend '", name,
           "'; registered: ", names_str(registered_backends()), " (or \"\" for the default)");
}

}  // namespace groupcoord
