// CudaCommunicator: construction, lifetime, checks and the factory. The operations are in
// cuda_collectives.cc, cuda_vvariants.cc, cuda_point_to_point.cc and cuda_moe.cc.
#include "cuda/cuda_communicator.h"

#include "cuda/runtime/device_guard.h"
#include "groupcoord/check.h"
#include "groupcoord/cuda/runtime.h"
#include "groupcoord/cuda/stream.h"
#include "groupcoord/logging.h"

namespace groupcoord {

namespace {

std::string pick_name(const DeviceCommunicatorContext& context) {
  if (!context.unique_name.empty()) return context.unique_name;
  return context.cpu_group ? context.cpu_group->name() : std::string("cuda");
}

}  // namespace

std::unique_ptr<DeviceCommunicator> make_cuda_communicator(
    const DeviceCommunicatorContext& context) {
  return std::make_unique<CudaCommunicator>(context);
}

CudaCommunicator::CudaCommunicator(const DeviceCommunicatorContext& context)
    : name_(pick_name(context)),
      device_(context.device),
      cpu_group_(context.cpu_group),
      use_all2all_(context.use_all2all) {
  GC_CHECK(cpu_group_ != nullptr, name_,
           " cuda communicator: the context has no cpu_group (NCCL is set up over it)");
  GC_CHECK(device_.is_cuda(), name_, " cuda communicator: device ", device_.str(),
           " is not a CUDA device");
  rank_ = cpu_group_->rank();
  world_size_ = cpu_group_->size();
  init_cuda_layer();  // outputs need the CUDA allocator, dim moves the copy kernel
  nccl_ = cuda::NcclComm::create(cpu_group_, device_, name_);
}

CudaCommunicator::~CudaCommunicator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    GC_LOG(Warn, name_, " cuda communicator: destroy failed: ", e.what());
  }
}

cuda::NcclComm& CudaCommunicator::nccl(const char* op) const {
  if (destroyed_.load()) {
    GC_THROW(DistributedError, name_, " ", op, ": the cuda communicator was destroyed");
  }
  return *nccl_;
}

void CudaCommunicator::check_tensor(const comm::OpLabel& where, const Tensor& tensor,
                                    const char* what) const {
  GC_CHECK(tensor.defined(), where, ": ", what, " is an undefined tensor");
  GC_CHECK(tensor.device() == device_, where, ": ", what, " must be a CUDA tensor on ",
           device_.str(), " (the communicator's device), got ", tensor.str());
}

void CudaCommunicator::synchronize() {
  cuda::NcclComm& nc = nccl("synchronize");
  nc.synchronize(current_cuda_stream(device_), "synchronize");
}

void CudaCommunicator::destroy() {
  if (destroyed_.exchange(true)) return;
  if (nccl_) nccl_->destroy();
}

}  // namespace groupcoord
