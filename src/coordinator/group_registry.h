// Process-wide bookkeeping of coordinators (vLLM's _get_unique_name and _groups): unique names
// "<name>:<n>" and the lookup of live coordinators by that name.
#pragma once

#include <cstdint>
#include <string>

namespace groupcoord {

class GroupCoordinator;

namespace coordinator_detail {

/// "<name>:<n>" where n counts the calls with this `name` in this process (0 first). The counter
/// never goes back, so a name is never reused, even after its coordinator is destroyed; every
/// rank creates its coordinators in the same order, so the names agree across ranks.
std::string make_unique_name(const std::string& name);

/// Records `group` under `unique_name` (replacing nothing: the names are unique).
void register_group(const std::string& unique_name, GroupCoordinator* group);

/// Forgets `unique_name` if it still maps to `group` (no effect otherwise).
void unregister_group(const std::string& unique_name, const GroupCoordinator* group);

/// The coordinator registered under `unique_name`, or nullptr.
GroupCoordinator* find_group(const std::string& unique_name);

/// Incremented (after the removal) each time unregister_group removes a coordinator.
std::uint64_t registry_generation();

}  // namespace coordinator_detail
}  // namespace groupcoord
