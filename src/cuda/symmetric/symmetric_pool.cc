// SymmetricMemory's pool: the windows behind symmetric_empty (see symmetric_memory.h).
//
// Each call is collective. The ranks first agree on what may be reused: every rank sends the ids
// of the blocks its tensors gave back since the last call, and only ids that every rank gave back
// are released. Then every rank runs the same first-fit allocation (symmetric_block_allocator.h)
// and, when nothing fits, adds the same new window. Equal inputs give equal offsets on every rank,
// which NCCL's symmetric kernels rely on.
#include <algorithm>
#include <map>
#include <numeric>

#include "cuda/nccl/nccl_comm.h"
#include "cuda/symmetric/symmetric_memory.h"
#include "cuda/symmetric/symmetric_scratch_layout.h"
#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

/// Bookkeeping shared with the deleters of pool tensors (which run on any thread, and may run
/// after the communicator is gone).
struct SymmetricMemory::PoolState {
  std::mutex mutex;
  SymmetricBlockAllocator allocator;
  std::vector<std::shared_ptr<SymmetricAllocation>> segments;
  /// Blocks given back on this rank and not yet released by agreement.
  std::vector<std::int64_t> given_back;
};

namespace {

std::size_t byte_size(const std::string& who, const Shape& shape, DType dtype) {
  std::size_t count = 1;
  for (std::int64_t extent : shape) {
    GC_CHECK(extent >= 0, who, ": negative size ", extent, " in the shape");
    count *= static_cast<std::size_t>(extent);
  }
  return count * dtype_size(dtype);
}

}  // namespace

bool SymmetricMemory::in_pool(const void* ptr, std::size_t bytes) const {
  std::shared_ptr<PoolState> pool;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pool = pool_;
  }
  if (!pool) return false;
  std::lock_guard<std::mutex> lock(pool->mutex);
  return std::any_of(pool->segments.begin(), pool->segments.end(),
                     [&](const auto& segment) { return segment->contains(ptr, bytes); });
}

void SymmetricMemory::release_agreed_blocks(std::size_t bytes, const char* op) {
  ProcessGroup& group = owner_.group();
  const int size = group.size();
  // Calls that finished hold pool tensors only until the watchdog's next round: let them go now,
  // so that a tensor dropped after a synchronised call is given back before the snapshot.
  owner_.release_completed();
  std::vector<std::int64_t> mine;
  {
    std::lock_guard<std::mutex> lock(pool_->mutex);
    mine = pool_->given_back;
  }
  const std::int64_t header[2] = {static_cast<std::int64_t>(bytes),
                                  static_cast<std::int64_t>(mine.size())};
  std::vector<std::int64_t> headers(2 * static_cast<std::size_t>(size));
  group.all_gather(header, headers.data(), 2, DType::Int64);
  for (int r = 0; r < size; ++r) {
    GC_CHECK(headers[2 * r] == header[0], owner_.name(), " ", op, ": rank ", r, " asked for ",
             headers[2 * r], " bytes but this rank for ", header[0],
             "; every rank must pass the same shape and dtype");
  }
  std::vector<std::size_t> counts(size);
  for (int r = 0; r < size; ++r) counts[r] = static_cast<std::size_t>(headers[2 * r + 1]);
  std::vector<std::int64_t> all(std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
  if (!all.empty()) group.all_gatherv(mine.data(), all.data(), counts, DType::Int64);

  std::map<std::int64_t, int> times;
  for (std::int64_t id : all) ++times[id];
  std::lock_guard<std::mutex> lock(pool_->mutex);
  for (const auto& [id, n] : times) {
    if (n != size) continue;  // some rank still uses its tensor over this block
    pool_->allocator.release(id);
    auto& back = pool_->given_back;
    back.erase(std::remove(back.begin(), back.end(), id), back.end());
  }
}

Tensor SymmetricMemory::empty(const Shape& shape, DType dtype, bool capturing) {
  const char* op = "symmetric_empty";
  GC_CHECK(enabled_.load(), owner_.name(), " ", op, ": symmetric memory is off (", disabled_reason_,
           ")");
  const std::size_t bytes = byte_size(owner_.name() + " " + op, shape, dtype);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pool_) pool_ = std::make_shared<PoolState>();
  }
  release_agreed_blocks(bytes, op);

  std::optional<SymmetricBlockAllocator::Block> block;
  {
    std::lock_guard<std::mutex> lock(pool_->mutex);
    block = pool_->allocator.allocate(bytes);
  }
  if (!block) {
    // Every rank reaches this point together: their allocators are in the same state.
    GC_CHECK(!capturing, owner_.name(), " ", op, ": ", bytes,
             " bytes need a new window, which cannot be registered during CUDA graph capture; "
             "allocate symmetric tensors before capturing");
    const std::size_t window = std::max<std::size_t>(
        static_cast<std::size_t>(settings_.pool_bytes),
        (bytes + kScratchGranularity - 1) / kScratchGranularity * kScratchGranularity);
    auto memory = allocate_window(window, op, "pool");
    std::lock_guard<std::mutex> lock(pool_->mutex);
    pool_->segments.push_back(memory);
    pool_->allocator.add_segment(window);
    block = pool_->allocator.allocate(bytes);
    std::lock_guard<std::mutex> counters(mutex_);
    counters_.pool_bytes += static_cast<std::int64_t>(window);
  }
  GC_CHECK(block.has_value(), owner_.name(), " ", op, ": internal error: no block after growth");

  std::shared_ptr<SymmetricAllocation> segment;
  {
    std::lock_guard<std::mutex> lock(pool_->mutex);
    segment = pool_->segments.at(block->segment);
  }
  void* data = static_cast<char*>(segment->data()) + block->offset;
  std::shared_ptr<PoolState> pool = pool_;
  const std::int64_t id = block->id;
  return Tensor::from_blob(data, shape, dtype, owner_.device(), [pool, segment, id](void*) {
    std::lock_guard<std::mutex> lock(pool->mutex);
    pool->given_back.push_back(id);
  });
}

}  // namespace cuda
}  // namespace groupcoord
