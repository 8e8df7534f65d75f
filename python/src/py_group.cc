#include "py_group.h"

#include <utility>

#include "groupcoord/check.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

/// unique_name -> Python object of a borrowed coordinator. Touched with the GIL held; leaked so
/// that no Python object is released after the interpreter.
py::dict& borrowed_cache() {
  static auto* cache = new py::dict();
  return *cache;
}

}  // namespace

PyGroup::PyGroup(std::unique_ptr<GroupCoordinator> owned)
    : owned_(std::move(owned)),
      group_(owned_.get()),
      unique_name_(group_->unique_name()),
      label_("GroupCoordinator(" + unique_name_ + ")") {}

PyGroup::PyGroup(GroupCoordinator& borrowed)
    : group_(&borrowed),
      unique_name_(borrowed.unique_name()),
      label_("GroupCoordinator(" + unique_name_ + ")") {}

PyGroup::~PyGroup() {
  if (!owned_) return;
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release release;
    owned_.reset();
  } else {
    owned_.reset();
  }
}

GroupCoordinator& PyGroup::get() const {
  if (owned_) return *group_;
  // The generation first: a coordinator destroyed after this read changes it, so the next call
  // looks again.
  const std::uint64_t generation = GroupCoordinator::registry_generation();
  if (generation == checked_generation_.load(std::memory_order_relaxed)) return *group_;
  if (GroupCoordinator::find(unique_name_) != group_) {
    GC_THROW(DistributedError, label_,
             ": this group no longer exists (destroy_model_parallel or "
             "destroy_distributed_environment destroyed it)");
  }
  checked_generation_.store(generation, std::memory_order_relaxed);
  return *group_;
}

py::object PyGroup::borrowed(GroupCoordinator& group) {
  py::dict& cache = borrowed_cache();
  py::str key(group.unique_name());
  if (cache.contains(key)) {
    py::object cached = cache[key];
    const auto& handle = cached.cast<const std::shared_ptr<PyGroup>&>();
    if (handle->group_ == &group) return cached;
  }
  py::object object = py::cast(std::make_shared<PyGroup>(group));
  cache[key] = object;
  return object;
}

void PyGroup::prune_borrowed() {
  py::dict& cache = borrowed_cache();
  py::list stale;
  for (auto item : cache) {
    const auto& handle = item.second.cast<const std::shared_ptr<PyGroup>&>();
    if (GroupCoordinator::find(handle->unique_name_) != handle->group_) stale.append(item.first);
  }
  for (auto key : stale) PyDict_DelItem(cache.ptr(), key.ptr());
}

}  // namespace python
}  // namespace groupcoord
