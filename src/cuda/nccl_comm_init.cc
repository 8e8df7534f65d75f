// NcclComm creation: readiness agreement, unique id exchange, non-blocking initialisation.
#include <chrono>
#include <cstring>
#include <exception>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/device_guard.h"
#include "cuda/nccl_comm.h"
#include "cuda/poll_pause.h"
#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

namespace {

// What rank 0 broadcasts: whether it made an id, and the id.
struct IdMessage {
  std::uint8_t ok;
  ncclUniqueId id;
};

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
      timeout_(group_->timeout()) {}

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
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; we poll with a deadline
  ncclComm_t comm = nullptr;
  const ncclResult_t started = api_->CommInitRankConfig(&comm, size_, id, rank_, &config);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  ncclResult_t state = started;
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
  std::lock_guard<std::mutex> lock(mutex_);
  comm_ = comm;
}

}  // namespace cuda
}  // namespace groupcoord
