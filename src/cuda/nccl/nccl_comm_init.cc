// NcclComm creation: readiness agreement, unique id exchange, and a blocking communicator made
// within a deadline (a polled non-blocking parent, split into the blocking communicator).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "bootstrap/env_parse.h"
#include "cuda/nccl/nccl_comm.h"
#include "cuda/nccl/poll_pause.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "groupcoord/check.h"
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
  comm->watchdog_ = std::thread([raw = comm.get()] { raw->watchdog_loop(); });
  comm->symmetric_ = std::make_unique<SymmetricMemory>(*comm, *api);  // collective agreement
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
  ncclComm_t parent = init_parent(id, deadline);
  ncclComm_t comm = split_blocking(parent, deadline);
  retire_parent(parent);
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

ncclComm_t NcclComm::init_parent(const ncclUniqueId& id,
                                 std::chrono::steady_clock::time_point deadline) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; we poll with a deadline
  ncclComm_t comm = nullptr;
  ncclResult_t state = api_->CommInitRankConfig(&comm, size_, id, rank_, &config);
  for (int round = 0; state == ncclInProgress && comm != nullptr; ++round) {
    if (std::chrono::steady_clock::now() >= deadline) {
      api_->CommAbort(comm);
      GC_THROW(TimeoutError, name_, " cuda communicator: NCCL initialisation (rank ", rank_, " of ",
               size_, " on ", device_.str(), ") did not complete within ", timeout_.count(),
               " ms; did every rank of the group create the communicator?");
    }
    poll_pause(round);
    api_->CommGetAsyncError(comm, &state);
  }
  if (state != ncclSuccess) {
    std::string detail;
    if (comm != nullptr && api_->GetLastError != nullptr) detail = api_->GetLastError(comm);
    if (comm != nullptr) api_->CommAbort(comm);
    GC_THROW(DistributedError, name_, " cuda communicator: NCCL initialisation (rank ", rank_,
             " of ", size_, " on ", device_.str(), ") failed: ", nccl_result_text(state),
             detail.empty() ? "" : ": ", detail);
  }
  return comm;
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
  if (state == ncclSuccess || state == ncclInProgress) api_->CommGetAsyncError(parent, &state);
  for (int round = 0; state == ncclInProgress; ++round) {
    if (std::chrono::steady_clock::now() >= deadline) {
      api_->CommAbort(parent);  // also stops the child's initialisation
      GC_THROW(TimeoutError, name_, " cuda communicator: NCCL initialisation (rank ", rank_, " of ",
               size_, " on ", device_.str(),
               ", the blocking communicator) did not complete "
               "within ",
               timeout_.count(), " ms; did every rank of the group create it?");
    }
    poll_pause(round);
    api_->CommGetAsyncError(parent, &state);
  }
  child = *static_cast<volatile ncclComm_t*>(&child);  // written by NCCL's thread
  if (state != ncclSuccess || child == nullptr) {
    std::string detail;
    if (api_->GetLastError != nullptr) detail = api_->GetLastError(parent);
    api_->CommAbort(parent);
    GC_THROW(DistributedError, name_, " cuda communicator: NCCL initialisation (rank ", rank_,
             " of ", size_, " on ", device_.str(),
             ", splitting off the blocking communicator) "
             "failed: ",
             nccl_result_text(state), detail.empty() ? "" : ": ", detail);
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

}  // namespace cuda
}  // namespace groupcoord
