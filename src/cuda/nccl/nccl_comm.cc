// NcclComm (nccl_comm.h), in the order of an operation's life: creation (readiness agreement,
// unique id exchange, a blocking communicator made within a deadline from a polled non-blocking
// parent), the calls and their waits, teardown, the symmetric windows, and the watchdog that
// aborts the communicator when something hangs or fails.
#include "cuda/nccl/nccl_comm.h"

#include <cuda_runtime_api.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/env_parse.h"
#include "cuda/nccl/poll_pause.h"
#include "cuda/nccl/steady_nanoseconds.h"
#include "cuda/runtime/abort_registry.h"
#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

namespace {

// Operations a communicator tracks at once before a caller waits for the oldest: far more than
// an engine step issues, few enough that the slots' events cost nothing noticeable.
// GROUPCOORD_NCCL_MAX_IN_FLIGHT overrides it (docs/cuda.md, "The hot path").
constexpr std::size_t kInFlightCapacity = 4096;
constexpr const char* kInFlightEnv = "GROUPCOORD_NCCL_MAX_IN_FLIGHT";

std::size_t in_flight_capacity() {
  const char* text = std::getenv(kInFlightEnv);
  if (text == nullptr || *text == '\0') return kInFlightCapacity;
  const int value = bootstrap_detail::parse_non_negative_int(text, kInFlightEnv);
  if (value < 128 || value > (1 << 20)) {
    throw std::invalid_argument(std::string(kInFlightEnv) + "=" + text +
                                ": the operations tracked per NCCL communicator must be between "
                                "128 and 1048576");
  }
  return static_cast<std::size_t>(value);
}

// What rank 0 broadcasts: whether it made an id, and the id.
struct IdMessage {
  std::uint8_t ok;
  ncclUniqueId id;
};

// How long retiring the non-blocking parent may take before it is aborted instead.
constexpr std::chrono::milliseconds kRetireLimit{10000};

std::string version_str(int version) {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

}  // namespace

NcclComm::NcclComm(const NcclApi& api, std::shared_ptr<ProcessGroup> group, Device device,
                   std::string name)
    : api_(&api),
      group_(std::move(group)),
      device_(device),
      name_(std::move(name)),
      rank_(group_->rank()),
      size_(group_->size()),
      timeout_(group_->timeout()),
      in_flight_(in_flight_capacity()) {}

std::shared_ptr<NcclComm> NcclComm::create(std::shared_ptr<ProcessGroup> group, Device device,
                                           std::string name) {
  GC_CHECK(group != nullptr, name, " cuda communicator: the context has no cpu_group");
  std::exception_ptr local_error;
  const NcclApi* api = nullptr;
  try {
    check_cuda_device(device, (name + " cuda communicator").c_str());
    api = &nccl_api();
  } catch (...) {
    local_error = std::current_exception();
  }
  agree_on_readiness(*group, name, local_error, api != nullptr ? api->version : 0);
  std::shared_ptr<NcclComm> comm(new NcclComm(*api, std::move(group), device, std::move(name)));
  comm->init_communicator(comm->exchange_unique_id());
  comm->start_watchdog();
  GC_LOG(Debug, comm->name_, ": NCCL communicator ready (rank ", comm->rank_, " of ", comm->size_,
         " on ", device.str(), ", NCCL ", version_str(api->version), ")");
  return comm;
}

void NcclComm::agree_on_readiness(ProcessGroup& group, const std::string& name,
                                  std::exception_ptr local_error, int version) {
  // Every rank takes part even when it failed, so that nobody waits for it until the timeout.
  const std::int64_t mine = local_error ? -1 : version;
  std::vector<std::int64_t> all(group.size());
  group.all_gather(&mine, all.data(), 1, DType::Int64);
  if (local_error) std::rethrow_exception(local_error);
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r] < 0) {
      GC_THROW(DistributedError, name, " cuda communicator: rank ", r,
               " of the group could not set up CUDA or NCCL (see its error)");
    }
  }
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r] != version) {
      GC_THROW(DistributedError, name, " cuda communicator: rank ", r, " loaded NCCL ",
               version_str(static_cast<int>(all[r])), " but this rank loaded ",
               version_str(version), "; every rank must use the same NCCL (", kNcclLibraryEnv, ")");
    }
  }
}

ncclUniqueId NcclComm::exchange_unique_id() {
  IdMessage message{};
  ncclResult_t result = ncclSuccess;
  if (rank_ == 0) {
    result = api_->GetUniqueId(&message.id);
    message.ok = result == ncclSuccess ? 1 : 0;
  }
  group_->broadcast(&message, sizeof(message), DType::UInt8, 0);
  if (rank_ == 0) {
    GC_NCCL_CHECK(result, name_, " cuda communicator: creating the NCCL unique id");
  } else if (message.ok == 0) {
    GC_THROW(DistributedError, name_,
             " cuda communicator: rank 0 of the group could not create "
             "the NCCL unique id (see its error)");
  }
  return message.id;
}

void NcclComm::init_communicator(const ncclUniqueId& id) {
  DeviceGuard guard(device_);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  adopt(finish_init(init_parent(id, deadline), deadline));
}

ncclComm_t NcclComm::finish_init(ncclComm_t parent,
                                 std::chrono::steady_clock::time_point deadline) {
  ncclComm_t comm = split_blocking(parent, deadline);
  retire_parent(parent);
  return comm;
}

void NcclComm::adopt(ncclComm_t comm) {
  // Before the first operation, so that none of the first thousands pays for its event. A
  // failure here is not fatal: the operations create the missing events (and report errors).
  const cudaError_t events = in_flight_.create_events();
  if (events != cudaSuccess) {
    (void)cudaGetLastError();
    GC_LOG(Warn, name_, ": creating the in-flight ring's events failed (", cuda_error_text(events),
           "); operations will create them");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  comm_ = comm;
  live_comm_.store(comm, std::memory_order_release);
}

void NcclComm::start_watchdog() {
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

ncclComm_t NcclComm::init_parent(const ncclUniqueId& id,
                                 std::chrono::steady_clock::time_point deadline) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; we poll with a deadline
  ncclComm_t comm = nullptr;
  const ncclResult_t state = api_->CommInitRankConfig(&comm, size_, id, rank_, &config);
  wait_initialised(comm, state, deadline, "NCCL initialisation",
                   "did every rank of the group create the communicator?");
  return comm;
}

void NcclComm::wait_initialised(ncclComm_t comm, ncclResult_t state,
                                std::chrono::steady_clock::time_point deadline, const char* what,
                                const char* hint) {
  for (int round = 0; state == ncclInProgress && comm != nullptr; ++round) {
    if (std::chrono::steady_clock::now() >= deadline) {
      api_->CommAbort(comm);
      GC_THROW(TimeoutError, name_, " cuda communicator: ", what, " (rank ", rank_, " of ", size_,
               " on ", device_.str(), ") did not complete within ", timeout_.count(), " ms; ",
               hint);
    }
    poll_pause(round);
    api_->CommGetAsyncError(comm, &state);
  }
  if (state != ncclSuccess || comm == nullptr) {
    std::string detail;
    if (comm != nullptr && api_->GetLastError != nullptr) detail = api_->GetLastError(comm);
    if (comm != nullptr) api_->CommAbort(comm);
    GC_THROW(DistributedError, name_, " cuda communicator: ", what, " (rank ", rank_, " of ", size_,
             " on ", device_.str(), ") failed: ",
             comm == nullptr && state == ncclSuccess ? std::string("NCCL made no communicator")
                                                     : nccl_result_text(state),
             detail.empty() ? "" : ": ", detail);
  }
}

ncclComm_t NcclComm::split_blocking(ncclComm_t parent,
                                    std::chrono::steady_clock::time_point deadline) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  // NCCL writes the child's handle from the parent's thread once the split has completed.
  ncclComm_t child = nullptr;
  ncclResult_t state = api_->CommSplit(parent, /*color=*/0, /*key=*/rank_, &child, &config);
  // On a non-blocking parent the split returns ncclSuccess at once and runs on NCCL's thread,
  // which marks the parent ncclInProgress until it is done: the parent's state is the answer.
  // Expiry aborts the parent, which also stops the child's initialisation.
  if (state == ncclSuccess || state == ncclInProgress) api_->CommGetAsyncError(parent, &state);
  wait_initialised(parent, state, deadline, "NCCL initialisation of the blocking communicator",
                   "did every rank of the group create it?");
  child = *static_cast<volatile ncclComm_t*>(&child);  // written by NCCL's thread
  if (child == nullptr) {
    api_->CommAbort(parent);
    GC_THROW(DistributedError, name_, " cuda communicator: NCCL initialisation (rank ", rank_,
             " of ", size_, " on ", device_.str(),
             ", splitting off the blocking communicator) made no communicator");
  }
  return child;
}

void NcclComm::retire_parent(ncclComm_t parent) {
  // The parent only made the blocking communicator within a deadline; nothing ran on it.
  const auto deadline = std::chrono::steady_clock::now() + std::min(timeout_, kRetireLimit);
  ncclResult_t state = api_->CommFinalize(parent);
  for (int round = 0; state == ncclInProgress; ++round) {
    if (std::chrono::steady_clock::now() >= deadline) break;
    poll_pause(round);
    api_->CommGetAsyncError(parent, &state);
  }
  if (state == ncclSuccess) {
    api_->CommDestroy(parent);
  } else {
    GC_LOG(Warn, name_, ": the NCCL parent communicator did not finalize (",
           nccl_result_text(state), "); aborting it");
    api_->CommAbort(parent);
  }
}

// -------------------------------------------------------------------------------------------------
// Shrink (nccl_comm.h): agree, ncclCommShrink as a watched call, the end of creation on the child,
// agree on the outcome; the old communicator abandoned.

#ifndef NCCL_SHRINK_DEFAULT  // an nccl.h older than 2.27; the values are NCCL's
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#endif

namespace {

// How long shrink() waits for the operations in flight before it has NCCL stop them
// (NCCL_SHRINK_ABORT): an operation that involves the dead peer never completes.
constexpr std::chrono::milliseconds kShrinkDrain{200};

// A survivor's answer in shrink()'s agreement; the smallest wins.
constexpr std::int32_t kCannotShrink = 0;
constexpr std::int32_t kShrinkAborting = 1;  // operations still in flight: NCCL_SHRINK_ABORT
constexpr std::int32_t kShrinkClean = 2;     // NCCL_SHRINK_DEFAULT

// Sets a flag for the life of a scope.
class ScopedFlag {
 public:
  explicit ScopedFlag(std::atomic<bool>& flag) : flag_(flag) { flag_.store(true); }
  ~ScopedFlag() { flag_.store(false); }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;

 private:
  std::atomic<bool>& flag_;
};

}  // namespace

std::shared_ptr<NcclComm> NcclComm::shrink(const std::vector<int>& excluded,
                                           std::shared_ptr<ProcessGroup> new_group) {
  // The arguments are the same on every survivor (the caller agreed on them), so a bad one
  // throws on all of them before anyone waits for the others.
  GC_CHECK(new_group != nullptr, name_, " shrink: no CPU group over the survivors");
  std::vector<int> ranks = excluded;  // sorted; NCCL sorts its argument in place anyway
  std::sort(ranks.begin(), ranks.end());
  GC_CHECK(std::adjacent_find(ranks.begin(), ranks.end()) == ranks.end(), name_,
           " shrink: a rank is excluded twice");
  GC_CHECK(ranks.empty() || (ranks.front() >= 0 && ranks.back() < size_), name_,
           " shrink: the excluded ranks must be ranks of the group (0 to ", size_ - 1, ")");
  GC_CHECK(!std::binary_search(ranks.begin(), ranks.end(), rank_), name_, " shrink: rank ", rank_,
           " is excluded; only the survivors shrink the communicator");
  const int below =
      static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), rank_) - ranks.begin());
  GC_CHECK(new_group->size() == size_ - static_cast<int>(ranks.size()) &&
               new_group->rank() == rank_ - below,
           name_, " shrink: the survivors' group (rank ", new_group->rank(), " of ",
           new_group->size(), ") is not this group of ", size_, " ranks without ", ranks.size(),
           " (this rank: ", rank_, ")");
  const std::string abandoned =
      "the group shrank (ranks left it), and this NCCL communicator was replaced";

  // Can this survivor keep its communicator? A watchdog abort freed NCCL's handle
  // (break_locked: ncclCommAbort, comm_ = nullptr): there is nothing left to shrink then.
  std::string why_not;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (destroyed_.load()) {
      why_not = "it was destroyed";
    } else if (broken_) {
      why_not = "it was aborted (" + broken_reason_ + "), which freed NCCL's handle";
    } else if (comm_ == nullptr) {
      why_not = "it is not initialised";
    }
  }
  if (why_not.empty() && !ranks.empty() && api_->CommShrink == nullptr) {
    why_not =
        "the loaded NCCL " + version_str(api_->version) + " has no ncclCommShrink (NCCL >= 2.27)";
  }
  bool pending = false;  // this rank's operations in flight, which NCCL_SHRINK_ABORT stops
  std::int32_t agreed = kCannotShrink;
  if (why_not.empty()) {
    pending = !ranks.empty() && !drain_in_flight(kShrinkDrain);
    agreed = pending ? kShrinkAborting : kShrinkClean;
  }
  try {
    new_group->all_reduce(&agreed, 1, DType::Int32, ReduceOp::Min);
  } catch (...) {
    if (!ranks.empty()) abandon(abandoned);
    throw;
  }
  if (agreed == kCannotShrink) {
    GC_LOG(Info, name_, ": shrink: the NCCL communicator is not kept (",
           why_not.empty() ? std::string("another survivor cannot keep its own") : why_not,
           "); a new one will be created");
    if (!ranks.empty()) abandon(abandoned);
    return nullptr;
  }
  if (ranks.empty()) {
    // Nobody left: the communicator stays as it is (NCCL refuses an empty exclusion list), over
    // the new CPU group, since the old one is retired.
    group_ = std::move(new_group);
    return shared_from_this();
  }

  const int flags = agreed == kShrinkAborting ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::shared_ptr<NcclComm> shrunk(new NcclComm(*api_, new_group, device_, name_));
  ncclComm_t made = nullptr;  // the blocking communicator over the survivors
  bool entered = false;       // ncclCommShrink was called here
  std::string failure;
  try {
    DeviceGuard guard(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // as at creation: polled, then split into a blocking communicator
    ncclComm_t child = nullptr;
    ncclResult_t state = ncclSuccess;
    {
      // The parent is blocking, so the call returns once the child is set up (NCCL runs a
      // group in the mode of the communicator it was issued on): watched against the timeout,
      // on whose expiry the watchdog aborts the parent, which stops the child's set-up too.
      ScopedFlag shrinking(shrinking_);
      state = call_nccl("shrink", timeout_, [&](const NcclApi& api, ncclComm_t comm) {
        entered = true;
        return api.CommShrink(comm, ranks.data(), static_cast<int>(ranks.size()), &child, &config,
                              flags);
      });
    }
    if (pending && flags == NCCL_SHRINK_ABORT) {
      record_abort(name_ + ": shrink stopped the operations in flight (ranks left the group)");
    }
    child = *static_cast<volatile ncclComm_t*>(&child);
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string detail;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        detail = last_error_locked();
      }
      if (child != nullptr) api_->CommAbort(child);
      GC_THROW(DistributedError, name_, " shrink: ncclCommShrink failed: ", nccl_result_text(state),
               detail);
    }
    if (child != nullptr) api_->CommGetAsyncError(child, &state);
    shrunk->wait_initialised(child, state, deadline, "ncclCommShrink",
                             "did every survivor shrink the communicator?");
    made = shrunk->finish_init(child, deadline);
  } catch (const std::exception& e) {
    failure = e.what();
    // The others wait inside NCCL for this rank until their deadline: meeting them before it
    // would let this rank's CPU collective below expire first.
    if (!entered) std::this_thread::sleep_until(deadline);
  }

  // Every survivor keeps the new communicator, or none does.
  std::int32_t ok = made != nullptr ? 1 : 0;
  try {
    new_group->all_reduce(&ok, 1, DType::Int32, ReduceOp::Min);
  } catch (...) {
    if (made != nullptr) {
      DeviceGuard guard(device_);
      api_->CommAbort(made);
    }
    abandon(abandoned);
    throw;
  }
  if (ok == 0) {
    if (made != nullptr) {
      DeviceGuard guard(device_);
      api_->CommAbort(made);
    }
    GC_LOG(Warn, name_, ": shrink: ",
           failure.empty() ? std::string("another survivor could not shrink the NCCL communicator")
                           : failure,
           "; a new one will be created");
    abandon(abandoned);
    return nullptr;
  }
  shrunk->adopt(made);
  shrunk->start_watchdog();
  abandon(abandoned);
  GC_LOG(Info, name_, ": NCCL communicator shrunk to rank ", shrunk->rank_, " of ", shrunk->size_,
         " (ncclCommShrink, ", flags == NCCL_SHRINK_ABORT ? "aborting" : "default", " mode)");
  return shrunk;
}

void NcclComm::abandon(const std::string& why) {
  if (destroyed_.load()) return;
  // Deregistering a window is a collective of every member, the dead one included: keep them.
  {
    std::lock_guard<std::mutex> owner_lock(window_owner_mutex_);
    if (window_owner_ != nullptr) keep_windows_forever(window_owner_->take_windows());
  }
  std::vector<Tensor> released;  // destroyed after the locks below
  bool pending = false;
  {
    RelaxedCaptureMode relaxed;  // event queries must not invalidate another thread's capture
    pending = in_flight_.reap(released).pending > 0;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_) {
      // Abort, not finalize: finalizing would wait for the peers, the dead one included.
      abort_locked(/*timed_out=*/false, why);
      // Results of operations the abort stopped are garbage: waits that know nothing about
      // communicators must say so.
      if (pending) record_abort(name_ + ": " + why);
    }
  }
  destroy();  // broken: no deregistration, no finalize; the watchdog stops
}

// -------------------------------------------------------------------------------------------------
// Operations, waits and teardown.

namespace {

// Teardown waits at most this long for ncclCommFinalize, as ProcessGroup::destroy does.
constexpr std::chrono::milliseconds kFinalizeLimit{10000};

// Our own waits give the watchdog (which polls every few ms) the chance to report first, so the
// error names the operation that hung rather than the wait.
constexpr std::chrono::milliseconds kWaitSlack{500};

// A caller that found the in-flight ring full waits until this many entries are free again, so
// that it does not come back on the very next call.
constexpr std::size_t kRingSlack = 64;

}  // namespace

NcclComm::~NcclComm() {
  try {
    destroy();
  } catch (const std::exception& e) {
    GC_LOG(Warn, name_, ": destroying the NCCL communicator failed: ", e.what());
  }
}

void NcclComm::enqueue(const char* op, cudaStream_t stream, NcclCallRef call, Tensor keepalive) {
  std::vector<Tensor> released;  // destroyed after the lock below is released
  // One lock for the call and its tracking: the ring has one producer at a time. The operation's
  // deadline counts from the start of the call.
  std::lock_guard<std::mutex> serial(call_mutex_);
  const std::int64_t now_ns = coarse_steady_nanoseconds();
  const ncclResult_t result = call_nccl_serialised(op, timeout_, call, false, now_ns);
  if (result != ncclSuccess) fail_call(op, result);
  track(op, stream, now_ns, keepalive, released);
}

void NcclComm::enqueue_group(const char* op, cudaStream_t stream,
                             const std::vector<NcclCall>& calls, Tensor keepalive) {
  enqueue(
      op, stream,
      [&calls](const NcclApi& api, ncclComm_t comm) {
        ncclResult_t result = api.GroupStart();
        if (result != ncclSuccess) return result;
        for (const NcclCall& call : calls) {
          result = call(api, comm);
          if (result != ncclSuccess) {
            api.GroupEnd();  // closes the group; NCCL reports the failure again there
            return result;
          }
        }
        return api.GroupEnd();
      },
      std::move(keepalive));
}

ncclResult_t NcclComm::call_nccl(const char* op, std::chrono::milliseconds limit, NcclCallRef call,
                                 bool teardown) {
  std::lock_guard<std::mutex> serial(call_mutex_);
  return call_nccl_serialised(op, limit, call, teardown, coarse_steady_nanoseconds());
}

ncclResult_t NcclComm::call_nccl_serialised(const char* op, std::chrono::milliseconds limit,
                                            NcclCallRef call, bool teardown, std::int64_t now_ns) {
  // An operation's fast path: one atomic load says the communicator is usable. Why it is not,
  // and teardown's calls (allowed once destroyed_ is set), take mutex_.
  ncclComm_t comm = teardown ? nullptr : live_comm_.load(std::memory_order_acquire);
  if (comm == nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (teardown) {
      if (broken_) throw_broken(op);
    } else {
      throw_if_unusable_locked(op);
    }
    comm = comm_;
  }
  GC_CHECK(comm != nullptr, name_, " ", op, ": the NCCL communicator is gone");
  watched_op_.store(op, std::memory_order_relaxed);
  watched_deadline_.store(now_ns + std::chrono::nanoseconds(limit).count(),
                          std::memory_order_release);
  const ncclResult_t result = call(*api_, comm);
  watched_deadline_.store(0, std::memory_order_release);
  if (result != ncclSuccess) {
    // The watchdog may have aborted the communicator while the call waited: that is the error.
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_) throw_broken(op);
  }
  return result;
}

void NcclComm::fail_call(const char* op, ncclResult_t result) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken_) throw_broken(op);
  ncclResult_t state = ncclSuccess;
  if (comm_ != nullptr) api_->CommGetAsyncError(comm_, &state);
  // Argument and usage errors leave the communicator as it was; anything else (a peer gone, a
  // CUDA or system error) leaves it in an unknown state.
  const bool refused = result == ncclInvalidArgument || result == ncclInvalidUsage;
  if (state != ncclSuccess || !refused) {
    const ncclResult_t cause = state != ncclSuccess ? state : result;
    break_locked(false, std::string(op) + " failed in NCCL: " + nccl_result_text(cause) +
                            last_error_locked());
    throw_broken(op);
  }
  GC_THROW(DistributedError, name_, " ", op, ": NCCL refused the call: ", nccl_result_text(result),
           last_error_locked());
}

std::string NcclComm::last_error_locked() const {
  if (comm_ == nullptr || api_->GetLastError == nullptr) return "";
  const char* text = api_->GetLastError(comm_);
  return text != nullptr && *text != '\0' ? std::string(": ") + text : std::string();
}

void NcclComm::track(const char* op, cudaStream_t stream, std::int64_t now_ns, Tensor& keepalive,
                     std::vector<Tensor>& released) {
  // The operation is enqueued: from here on a failure must not free its buffer.
  try {
    if (stream_is_capturing(stream, name_, " ", op)) return;  // a graph node: nothing runs yet
    for (;;) {
      // No notify: while operations are in flight the watchdog wakes every few milliseconds
      // anyway, and waking it per call would cost a system call on the hot path.
      cudaError_t error = cudaSuccess;
      switch (in_flight_.push(op, stream, now_ns, keepalive, &error)) {
        case InFlightRing::Push::kDone:
          return;
        case InFlightRing::Push::kCudaError:
          GC_CUDA_CHECK(error, name_, " ", op, ": recording the completion event");
          return;
        case InFlightRing::Push::kFull:
          wait_for_ring_room(op, released);
          break;
      }
    }
  } catch (...) {
    if (keepalive.defined()) keep_forever(std::move(keepalive));
    throw;
  }
}

void NcclComm::wait_for_ring_room(const char* op, std::vector<Tensor>& released) {
  RelaxedCaptureMode relaxed;  // event queries must not invalidate another thread's capture
  const auto deadline = std::chrono::steady_clock::now() + timeout_ + kWaitSlack;
  for (int round = 0;; ++round) {
    in_flight_.reap(released);
    if (in_flight_.room() >= kRingSlack) return;
    check_usable(op);  // the watchdog may have aborted: the oldest operation hung
    if (std::chrono::steady_clock::now() >= deadline) {
      break_comm(true, std::string(op) +
                           ": the GPU did not complete the oldest of the "
                           "operations in flight within the group's timeout");
      check_usable(op);
    }
    poll_pause(round);
  }
}

void NcclComm::wait_event(cudaEvent_t event, const char* op, std::chrono::milliseconds timeout,
                          bool abort_on_expiry) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int round = 0;; ++round) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) {
      // After an abort NCCL's kernels quit early, so a completed event proves nothing then.
      std::lock_guard<std::mutex> lock(mutex_);
      if (broken_) throw_broken(op);
      return;
    }
    if (state != cudaErrorNotReady) {
      GC_CUDA_CHECK(state, name_, " ", op, ": waiting for the operation");
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (destroyed_.load() || broken_) throw_if_unusable_locked(op);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      if (abort_on_expiry) {
        break_comm(true, std::string(op) + " did not complete within " +
                             std::to_string(timeout.count()) + " ms");
        std::lock_guard<std::mutex> lock(mutex_);
        throw_broken(op);
      }
      GC_THROW(TimeoutError, name_, " ", op, ": the operation did not complete within ",
               timeout.count(), " ms (it is still running)");
    }
    poll_pause(round);
  }
}

void NcclComm::synchronize(cudaStream_t stream, const char* op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    throw_if_unusable_locked(op);
  }
  DeviceGuard guard(device_);
  GC_CHECK(!stream_is_capturing(stream, name_, " ", op), name_, " ", op,
           ": cannot wait for a stream that is being captured into a CUDA graph");
  // An event of its own (not a hot path): one that a failed wait leaves pending is never reused.
  cudaEvent_t event = nullptr;
  GC_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), name_, " ", op,
                ": creating a CUDA event");
  try {
    GC_CUDA_CHECK(cudaEventRecord(event, stream), name_, " ", op);
    wait_event(event, op, timeout_ + kWaitSlack, /*abort_on_expiry=*/true);
  } catch (...) {
    cudaEventDestroy(event);
    throw;
  }
  cudaEventDestroy(event);
}

void NcclComm::throw_if_unusable_locked(const char* op) const {
  if (destroyed_.load()) {
    GC_THROW(DistributedError, name_, " ", op, ": the NCCL communicator was destroyed");
  }
  if (broken_) throw_broken(op);
  if (comm_ == nullptr) {
    GC_THROW(DistributedError, name_, " ", op, ": the NCCL communicator is not initialised");
  }
}

void NcclComm::check_usable(const char* op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_unusable_locked(op);
}

void keep_windows_forever(std::vector<RegisteredWindow> windows) {
  static std::mutex mutex;
  static auto* kept = new std::vector<RegisteredWindow>();
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& window : windows) kept->push_back(std::move(window));
}

void NcclComm::set_window_owner(WindowOwner* owner) {
  std::lock_guard<std::mutex> lock(window_owner_mutex_);
  window_owner_ = owner;
}

bool NcclComm::is_broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

void NcclComm::destroy() {
  if (destroyed_.exchange(true)) return;
  live_comm_.store(nullptr, std::memory_order_release);
  // A caller that passed the usability check before destroyed_ was set finishes its call and
  // its tracking first; later callers see destroyed_. (A call hung inside NCCL holds the lock
  // until the watchdog aborts it, within the timeout.)
  { std::lock_guard<std::mutex> serial(call_mutex_); }
  // Symmetric windows go first, once nothing in flight (NCCL calls, and the copies out of the
  // scratch that follow them) can still touch them. Their memory is freed only after the
  // communicator is gone, when `windows` goes out of scope. The watchdog keeps running until the
  // end: the teardown calls are watched like any other.
  const auto limit = std::min(timeout_, kFinalizeLimit);
  bool operations_done = false;
  std::vector<RegisteredWindow> windows;
  {
    std::lock_guard<std::mutex> owner_lock(window_owner_mutex_);  // the owner cannot go meanwhile
    WindowOwner* owner = window_owner_;
    operations_done = drain_in_flight(limit) && (!owner || owner->wait_idle(limit));
    if (owner) windows = owner->take_windows();  // before mutex_: leases lock the other way
  }
  {
    DeviceGuard guard(device_);  // NCCL frees device memory of this device
    release_windows(windows, limit, operations_done);
  }
  const bool clean = close_communicator(operations_done, limit);
  {
    std::lock_guard<std::mutex> lock(watchdog_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  release_in_flight(clean);
}

bool NcclComm::close_communicator(bool operations_done, std::chrono::milliseconds limit) {
  bool healthy = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    healthy = comm_ != nullptr && !broken_;
  }
  if (healthy && operations_done) {
    try {
      DeviceGuard guard(device_);
      const auto finalize = [](const NcclApi& api, ncclComm_t c) { return api.CommFinalize(c); };
      if (call_nccl("finalize", limit, finalize, /*teardown=*/true) == ncclSuccess) {
        ncclComm_t comm = nullptr;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          std::swap(comm, comm_);
        }
        const ncclResult_t destroyed = api_->CommDestroy(comm);
        if (destroyed != ncclSuccess) {
          GC_LOG(Warn, name_, ": ncclCommDestroy failed: ", nccl_result_text(destroyed));
        }
        return true;
      }
    } catch (const std::exception& e) {
      GC_LOG(Warn, name_, ": finalizing the NCCL communicator failed: ", e.what());
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_ != nullptr) {
    GC_LOG(Warn, name_, ": releasing the NCCL communicator by aborting it (",
           operations_done ? "finalize failed" : "operations were still running", ")");
    cudaSetDevice(device_.index);
    api_->CommAbort(comm_);
    comm_ = nullptr;
  }
  return false;
}

// -------------------------------------------------------------------------------------------------
// NcclComm's symmetric windows: collective registration with a deadline (a watched call, see
// nccl_comm.h), and their release at teardown in an order that never frees memory the GPU or
// NCCL may still use:
//   1. wait (bounded) for every operation in flight, 2. deregister each window, 3. finalize and
//   destroy the communicator (above), 4. the memory is freed when its last owner (a pool
//   tensor, or the released window list) lets go.
// When operations did not finish, or the communicator was aborted, the windows and their memory
// are leaked on purpose (logged): a kernel or a peer may still read them.

ncclWindow_t NcclComm::register_window(void* data, std::size_t bytes, int flags, const char* op,
                                       bool ready) {
  GC_CHECK(api_->CommWindowRegister != nullptr, name_, " ", op,
           ": the loaded NCCL has no ncclCommWindowRegister");
  // ncclCommWindowRegister waits for every rank without a deadline of its own: meet over the
  // CPU group first (which has one), check that every rank registers the same size, and that
  // every rank is able to (its memory allocated, the communicator usable).
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Aborted and the CPU group broken too (a peer gone): there is nobody to meet, so say why at
    // once. Otherwise the peers are told below that this rank cannot register.
    if (broken_ && group_->is_broken()) throw_broken(op);
    if (destroyed_.load() || broken_ || comm_ == nullptr) ready = false;
  }
  const std::int64_t mine[2] = {static_cast<std::int64_t>(bytes), ready ? 1 : 0};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size_));
  try {
    group_->all_gather(mine, all.data(), 2, DType::Int64);
  } catch (const TimeoutError& e) {
    // A peer that never joins this op: the communicator is as unusable as after a hung NCCL
    // call, and the error names the op (not only the CPU group's step).
    break_comm(true, std::string(op) +
                         " did not start: a peer did not join the window "
                         "registration within the group's timeout (" +
                         e.what() + ")");
    check_usable(op);
  }
  for (int r = 0; r < size_; ++r) {
    if (all[2 * r + 1] == 0) {
      check_usable(op);  // this rank's own reason, when it is the one
      GC_THROW(DistributedError, name_, " ", op, ": rank ", r,
               " of the group cannot register the window (see its error); nobody does");
    }
  }
  for (int r = 0; r < size_; ++r) {
    GC_CHECK(all[2 * r] == mine[0], name_, " ", op, ": rank ", r, " registers a window of ",
             all[2 * r], " bytes but this rank one of ", mine[0],
             "; every rank must register the same size");
  }
  DeviceGuard guard(device_);
  ncclWindow_t window = nullptr;
  const ncclResult_t result = call_nccl(op, timeout_, [&](const NcclApi& api, ncclComm_t comm) {
    return api.CommWindowRegister(comm, data, bytes, &window, flags);
  });
  if (result != ncclSuccess) fail_call(op, result);
  GC_CHECK(window != nullptr, name_, " ", op, ": ncclCommWindowRegister registered nothing for ",
           bytes, " bytes");
  return window;
}

bool NcclComm::drain_in_flight(std::chrono::milliseconds limit) {
  RelaxedCaptureMode relaxed;  // event queries must not invalidate another thread's capture
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int round = 0;; ++round) {
    std::vector<Tensor> released;
    const InFlightRing::Scan scan = in_flight_.reap(released);
    // Entries whose event failed never complete: no use waiting for them.
    if (scan.pending == scan.failed) return scan.pending == 0;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    poll_pause(round);
  }
}

void NcclComm::release_windows(std::vector<RegisteredWindow>& windows,
                               std::chrono::milliseconds limit, bool operations_done) {
  if (windows.empty()) return;
  bool usable = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    usable = comm_ != nullptr && !broken_;
  }
  if (!usable || !operations_done) {
    GC_LOG(Warn, name_, ": ", windows.size(), " symmetric window(s) kept with their memory: ",
           usable ? "operations were still running" : "the communicator was aborted");
    keep_windows_forever(std::move(windows));
    windows.clear();
    return;
  }
  for (RegisteredWindow& window : windows) {
    ncclResult_t state = ncclInternalError;
    try {
      state = call_nccl(
          "deregister window", limit,
          [&](const NcclApi& api, ncclComm_t comm) {
            return api.CommWindowDeregister(comm, window.handle);
          },
          /*teardown=*/true);
    } catch (const std::exception& e) {
      GC_LOG(Warn, name_, ": ", e.what());
    }
    if (state != ncclSuccess) {
      GC_LOG(Warn, name_, ": deregistering a symmetric window failed (", nccl_result_text(state),
             "); its memory is kept");
      std::vector<RegisteredWindow> kept;
      kept.push_back(std::move(window));
      keep_windows_forever(std::move(kept));
    }
  }
}

void NcclComm::release_completed() {
  RelaxedCaptureMode relaxed;  // may run on a thread next to another thread's capture
  std::vector<Tensor> released;
  in_flight_.reap(released);
}

// -------------------------------------------------------------------------------------------------
// NcclComm's watchdog thread and failure handling. The thread wakes every few milliseconds while
// operations are in flight (rarely otherwise), reaps the operations whose events completed, and
// aborts the communicator on an asynchronous NCCL error or when the oldest operation has been in
// flight longer than the timeout. Waiting callers then see the broken flag and throw.

namespace {

// Poll periods: short while work is in flight (the timeout is detected within this much), long
// when idle (only asynchronous errors can show up then).
constexpr std::chrono::milliseconds kBusyPeriod{10};
constexpr std::chrono::milliseconds kIdlePeriod{200};

}  // namespace

void NcclComm::keep_forever(Tensor buffer) {
  // Reachable, so leak checkers stay quiet, until the process ends.
  static std::mutex mutex;
  static auto* kept = new std::vector<Tensor>();
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(buffer));
}

void NcclComm::abort_locked(bool timed_out, const std::string& reason) {
  broken_ = true;
  live_comm_.store(nullptr, std::memory_order_release);
  broken_by_timeout_ = timed_out;
  broken_reason_ = reason;
  if (comm_ != nullptr) {
    // Best effort: a sticky CUDA error must not stop the abort, through which alone every stream
    // waiting on NCCL's kernels drains.
    BestEffortDeviceGuard guard(device_);
    api_->CommAbort(comm_);
    comm_ = nullptr;
  }
}

void NcclComm::break_locked(bool timed_out, const std::string& reason) {
  if (broken_) return;  // the first reason is the one worth reporting
  GC_LOG(Error, name_, ": aborting the NCCL communicator (rank ", rank_, " of ", size_, " on ",
         device_.str(), "): ", reason);
  abort_locked(timed_out, reason);
  record_abort(name_ + ": " + reason);
}

void NcclComm::break_comm(bool timed_out, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  break_locked(timed_out, reason);
}

void NcclComm::throw_broken(const char* op) const {
  if (broken_by_timeout_) {
    GC_THROW(TimeoutError, name_, " ", op, ": the NCCL communicator was aborted because ",
             broken_reason_);
  }
  GC_THROW(DistributedError, name_, " ", op, ": the NCCL communicator was aborted because ",
           broken_reason_);
}

void NcclComm::watchdog_loop() {
  // The watchdog may query events while another thread captures a CUDA graph in global mode,
  // which would make those calls fail (and invalidate the capture): relax the mode for this
  // thread.
  cudaSetDevice(device_.index);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  std::unique_lock<std::mutex> lock(watchdog_mutex_);
  while (!stop_) {
    wake_.wait_for(lock, in_flight_.empty() ? kIdlePeriod : kBusyPeriod);
    if (stop_) break;
    lock.unlock();
    try {
      watchdog_check();
    } catch (const std::exception& e) {
      GC_LOG(Error, name_, ": NCCL watchdog: ", e.what());
    }
    lock.lock();
  }
}

void NcclComm::check_watched_call() {
  const std::int64_t deadline = watched_deadline_.load(std::memory_order_acquire);
  if (deadline == 0 || coarse_steady_nanoseconds() < deadline) return;
  const char* op = watched_op_.load(std::memory_order_relaxed);
  break_comm(true, std::string(op != nullptr ? op : "an NCCL call") +
                       " did not return from NCCL within the group's timeout of " +
                       std::to_string(timeout_.count()) +
                       " ms (a peer that never joined it? did every rank call it?)");
}

void NcclComm::watchdog_check() {
  check_watched_call();
  // During ncclCommShrink only its deadline counts: with NCCL_SHRINK_ABORT the operations in
  // flight are stopped on purpose, and the communicator is abandoned afterwards anyway.
  if (shrinking_.load()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_ && comm_ != nullptr) {
      ncclResult_t state = ncclSuccess;
      api_->CommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        break_locked(false, "NCCL reported an asynchronous error: " + nccl_result_text(state) +
                                last_error_locked());
      }
    }
  }
  std::vector<Tensor> released;  // destroyed at the end of the round, no lock held
  const InFlightRing::Scan scan = in_flight_.reap(released);
  std::string failure;
  bool timed_out = false;
  if (scan.failed_op != nullptr) {
    failure = std::string(scan.failed_op) + " failed on the GPU: " + cuda_error_text(scan.failure);
  } else if (scan.oldest_op != nullptr) {
    const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::nanoseconds(coarse_steady_nanoseconds() - scan.oldest_enqueued_ns));
    if (age > timeout_) {
      timed_out = true;
      failure = std::string(scan.oldest_op) + " did not complete within the group's timeout of " +
                std::to_string(timeout_.count()) + " ms (enqueued " + std::to_string(age.count()) +
                " ms ago; did every rank call it?)";
    }
  }
  if (!failure.empty()) break_comm(timed_out, failure);
}

void NcclComm::release_in_flight(bool all_completed) {
  // The GPU may still touch the buffers of operations that never completed: leaking them beats
  // freeing memory in use.
  const std::size_t leaked = in_flight_.release_all(all_completed, keep_forever);
  if (leaked > 0) {
    GC_LOG(Warn, name_, ": ", leaked,
           " NCCL operation(s) had not completed at teardown; their "
           "buffers are leaked on purpose");
  }
}

}  // namespace cuda
}  // namespace groupcoord
