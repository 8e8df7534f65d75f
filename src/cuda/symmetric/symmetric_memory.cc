// SymmetricMemory (symmetric_memory.h): agreement, windows, the scratch window of the routed
// collectives and teardown, then the pool behind symmetric_empty.
#include "cuda/symmetric/symmetric_memory.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <thread>

#include "cuda/nccl/nccl_comm.h"
#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "cuda/runtime/driver_calls.h"
#include "cuda/symmetric/symmetric_probe.h"
#include "cuda/symmetric/symmetric_scratch_layout.h"
#include "groupcoord/check.h"
#include "groupcoord/cuda/stream.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

namespace {

// What each rank contributes to the agreement.
enum AgreementStatus : std::int64_t { kUsable = 0, kRefused = 1, kBadSettings = 2 };
constexpr int kAgreementFields = 6;

}  // namespace

// ---- agreement -----------------------------------------------------------------------------

SymmetricMemory::SymmetricMemory(NcclComm& owner, const NcclApi& api) : owner_(owner), api_(&api) {
  agree(api);
  owner_.set_window_owner(this);
}

void SymmetricMemory::agree(const NcclApi& api) {
  ProcessGroup& group = owner_.group();
  std::string local_reason;
  std::int64_t status = kUsable;
  try {
    settings_ = read_symmetric_settings();
    SymmetricCapabilities caps;
    caps.nccl_version = api.version;
    caps.has_window_api = api.has_windows();
    caps.cumem_supported = settings_.requested && device_supports_cumem(owner_.device().index);
    local_reason = symmetric_refusal(settings_, caps);
    if (local_reason.empty()) {  // everything else is fine: can NCCL register a window here?
      caps.window_probe = probe_window_registration(api, owner_.device(), settings_.window_flags);
      local_reason = symmetric_refusal(settings_, caps);
    }
    if (!local_reason.empty()) status = kRefused;
  } catch (const std::invalid_argument& e) {
    local_reason = e.what();
    status = kBadSettings;
  }
  const std::int64_t mine[kAgreementFields] = {status,
                                               settings_.scratch_bytes,
                                               settings_.scratch_max_bytes,
                                               settings_.pool_bytes,
                                               static_cast<std::int64_t>(settings_.all_reduce),
                                               settings_.window_flags};
  std::vector<std::int64_t> all(static_cast<std::size_t>(group.size()) * kAgreementFields);
  group.all_gather(mine, all.data(), kAgreementFields, DType::Int64);

  // Every rank throws for bad settings anywhere, so that no rank goes on alone.
  for (int r = 0; r < group.size(); ++r) {
    if (all[r * kAgreementFields] != kBadSettings) continue;
    if (status == kBadSettings) {
      GC_THROW(std::invalid_argument, owner_.name(), " symmetric memory: ", local_reason);
    }
    GC_THROW(std::invalid_argument, owner_.name(), " symmetric memory: rank ", r,
             " of the group has an invalid symmetric-memory setting (see its error)");
  }
  disabled_reason_ = local_reason;
  for (int r = 0; r < group.size() && disabled_reason_.empty(); ++r) {
    const std::int64_t* theirs = &all[r * kAgreementFields];
    if (theirs[0] != kUsable) {
      disabled_reason_ = "rank " + std::to_string(r) + " of the group cannot use it (see its log)";
    } else if (!std::equal(theirs + 1, theirs + kAgreementFields, mine + 1)) {
      disabled_reason_ = "rank " + std::to_string(r) +
                         " has different GROUPCOORD_SYMM_* settings; they must match on every rank";
    }
  }
  enabled_ = disabled_reason_.empty();
  if (enabled_.load()) {
    GC_LOG(Info, owner_.name(), ": NCCL symmetric memory on (",
           window_flags_name(settings_.window_flags), " windows, scratch ",
           settings_.scratch_bytes >> 20, " MiB, up to ", settings_.scratch_max_bytes >> 20,
           " MiB; all_reduce routing: ", all_reduce_routing_name(settings_.all_reduce), ")");
  } else if (settings_.requested) {
    GC_LOG(Warn, owner_.name(),
           ": NCCL symmetric memory refused, using the regular path: ", disabled_reason_);
  }
  pool_ = nullptr;  // created lazily by the first symmetric_empty (below)
}

SymmetricMemory::~SymmetricMemory() {
  owner_.set_window_owner(nullptr);  // waits for a destroy() that is deregistering our windows
  // Windows left here were never deregistered (the communicator was not destroyed first): freeing
  // their memory under a live NCCL registration is undefined, so they are kept, and said.
  std::vector<RegisteredWindow> left = take_windows();
  if (!left.empty()) {
    GC_LOG(Error, owner_.name(), ": ", left.size(),
           " symmetric window(s) still registered when the symmetric memory went; their memory is "
           "kept for the life of the process");
    keep_windows_forever(std::move(left));
  }
  if (scratch_event_ != nullptr) cudaEventDestroy(scratch_event_);
}

SymmetricMemoryStats SymmetricMemory::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  SymmetricMemoryStats s = counters_;
  s.enabled = enabled_.load();
  s.disabled_reason = disabled_reason_;
  s.window_kind = s.enabled ? window_flags_name(settings_.window_flags) : "";
  return s;
}

void SymmetricMemory::count_symmetric_call(bool zero_copy) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counters_.symmetric_calls;
  if (zero_copy) ++counters_.zero_copy_calls;
}

// ---- windows -------------------------------------------------------------------------------

void SymmetricMemory::register_allocation(const std::shared_ptr<SymmetricAllocation>& memory,
                                          const char* op) {
  GC_CHECK(memory != nullptr, owner_.name(), " ", op, ": no memory to register");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (windows_.count(memory->data()) != 0) return;  // this communicator has it already
  }
  const ncclWindow_t handle =
      owner_.register_window(memory->data(), memory->size(), settings_.window_flags, op);
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.emplace(memory->data(), RegisteredWindow{memory, handle, next_sequence_++});
  ++counters_.windows_registered;
}

std::shared_ptr<SymmetricAllocation> SymmetricMemory::allocate_window(std::size_t bytes,
                                                                      const char* op,
                                                                      const char* what) {
  std::shared_ptr<SymmetricAllocation> memory;
  try {
    memory = SymmetricAllocation::allocate(*api_, owner_.device(), bytes,
                                           owner_.name() + " " + op + " " + what);
  } catch (const std::exception& e) {
    GC_LOG(Error, e.what());
    // Meet the others anyway (they are about to register): everybody throws together.
    owner_.register_window(nullptr, bytes, settings_.window_flags, op, /*ready=*/false);
    throw;  // not reached: register_window throws when a rank is not ready
  }
  register_allocation(memory, op);
  return memory;
}

bool SymmetricMemory::wait_idle(std::chrono::milliseconds limit) {
  std::lock_guard<std::mutex> lock(scratch_mutex_);
  if (!scratch_event_pending_) return true;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (cudaEventQuery(scratch_event_) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  (void)cudaGetLastError();
  return true;
}

std::vector<RegisteredWindow> SymmetricMemory::take_windows() {
  std::unique_lock<std::mutex> scratch_lock(scratch_mutex_);
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RegisteredWindow> windows;
  for (auto& entry : windows_) windows.push_back(std::move(entry.second));
  windows_.clear();
  // Newest first, the same order on every rank (registration order is collective).
  std::sort(windows.begin(), windows.end(),
            [](const auto& a, const auto& b) { return a.sequence > b.sequence; });
  enabled_ = false;
  if (disabled_reason_.empty()) disabled_reason_ = "the communicator was destroyed";
  scratch_ = nullptr;
  retired_scratch_.clear();
  return windows;
}

// ---- scratch -------------------------------------------------------------------------------

SymmetricMemory::Lease::Lease(Lease&& other) noexcept
    : lock_(std::move(other.lock_)),
      owner_(other.owner_),
      base_(other.base_),
      stream_(other.stream_),
      finished_(other.finished_) {
  other.owner_ = nullptr;
  other.base_ = nullptr;
}

SymmetricMemory::Lease::~Lease() {
  if (owner_ == nullptr || finished_) return;
  try {
    finish(stream_);
  } catch (const std::exception& e) {
    GC_LOG(Warn, "symmetric scratch: ", e.what());
  }
}

void SymmetricMemory::Lease::finish(cudaStream_t stream) {
  finished_ = true;
  // Replays are ordered by the caller: nothing to record during a capture.
  if (owner_ == nullptr || stream_is_capturing(stream, "symmetric scratch")) return;
  GC_CUDA_CHECK(record_event(owner_->scratch_event_, stream), owner_->owner_.name(),
                ": recording the end of a symmetric call");
  owner_->scratch_stream_ = stream;
  owner_->scratch_event_pending_ = true;
}

SymmetricMemory::Lease SymmetricMemory::lease_scratch(std::size_t bytes, cudaStream_t stream,
                                                      const char* op) {
  Lease lease;
  if (!enabled_.load()) return lease;
  std::unique_lock<std::mutex> lock(scratch_mutex_);
  const bool capturing = stream_is_capturing(stream, owner_.name(), " ", op);
  const std::size_t current = scratch_ ? scratch_->size() : 0;
  const auto wanted =
      scratch_size_for(current, bytes, settings_.scratch_bytes, settings_.scratch_max_bytes);
  const bool fits = wanted.has_value() && *wanted == current && current > 0;
  if (!fits && (capturing || !wanted.has_value())) {
    std::lock_guard<std::mutex> counters(mutex_);
    ++counters_.fallbacks;
    GC_LOG(Debug, owner_.name(), " ", op, ": ", bytes, " bytes of scratch ",
           capturing ? "not available during graph capture" : "above the limit", "; regular path");
    return lease;
  }
  if (!fits) grow_scratch_locked(*wanted, op);
  // A call on another stream must not overwrite the scratch before the last one is done with it.
  if (!capturing && scratch_event_pending_ && scratch_stream_ != stream) {
    GC_CUDA_CHECK(cudaStreamWaitEvent(stream, scratch_event_, 0), owner_.name(), " ", op,
                  ": ordering the scratch after the previous call");
  }
  lease.lock_ = std::move(lock);
  lease.owner_ = this;
  lease.stream_ = stream;
  lease.base_ = static_cast<char*>(scratch_->data());
  return lease;
}

void SymmetricMemory::reserve_scratch(std::size_t bytes) {
  const char* op = "reserve_symmetric_scratch";
  bytes = std::max<std::size_t>(bytes, 1);
  GC_CHECK(enabled_.load(), owner_.name(), " ", op, ": symmetric memory is off (", disabled_reason_,
           ")");
  std::unique_lock<std::mutex> lock(scratch_mutex_);
  const std::size_t current = scratch_ ? scratch_->size() : 0;
  const auto wanted =
      scratch_size_for(current, bytes, settings_.scratch_bytes, settings_.scratch_max_bytes);
  GC_CHECK(wanted.has_value(), owner_.name(), " ", op, ": ", bytes,
           " bytes exceed GROUPCOORD_SYMM_SCRATCH_MAX_BYTES=", settings_.scratch_max_bytes);
  if (*wanted == current && current > 0) return;
  GC_CHECK(!stream_is_capturing(current_cuda_stream(owner_.device()), owner_.name(), " ", op),
           owner_.name(), " ", op, ": cannot register a window during CUDA graph capture");
  grow_scratch_locked(*wanted, op);
}

void SymmetricMemory::grow_scratch_locked(std::size_t bytes, const char* op) {
  DeviceGuard guard(owner_.device());
  if (scratch_event_ == nullptr) {
    GC_CUDA_CHECK(cudaEventCreateWithFlags(&scratch_event_, cudaEventDisableTiming), owner_.name(),
                  " ", op, ": creating the scratch event");
  }
  auto memory = allocate_window(bytes, op, "scratch");
  // Graphs captured earlier may still point at the old scratch: keep it until destroy.
  if (scratch_) retired_scratch_.push_back(std::move(scratch_));
  scratch_ = std::move(memory);
  std::lock_guard<std::mutex> counters(mutex_);
  counters_.scratch_bytes = static_cast<std::int64_t>(bytes);
  GC_LOG(Debug, owner_.name(), ": symmetric scratch is now ", bytes, " bytes");
}

// -------------------------------------------------------------------------------------------------
// SymmetricMemory's pool: the windows behind symmetric_empty (see symmetric_memory.h).
//
// Each call is collective. The ranks first agree on what may be reused: every rank sends the ids
// of the blocks its tensors gave back since the last call, and only ids that every rank gave back
// are released. Then every rank runs the same first-fit allocation (symmetric_block_allocator.h)
// and, when nothing fits, adds the same new window. Equal inputs give equal offsets on every rank,
// which NCCL's symmetric kernels rely on.

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
