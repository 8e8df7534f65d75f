#include "communicator/naive_all2all.h"

#include <exception>
#include <numeric>

#include "communicator/op_checks.h"
#include "communicator/op_label.h"
#include "communicator/sizes.h"
#include "groupcoord/check.h"

namespace groupcoord {
namespace comm {

namespace {

// Marks a rank whose inputs failed validation in the counts exchange.
constexpr std::int64_t kInvalidCount = -1;

// Local checks of one dispatch; throws std::invalid_argument.
void check_dispatch_inputs(const OpLabel& where, const std::vector<Tensor>& tensors,
                           const std::vector<std::string>& names, Device device) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    check_tensor_on(where, tensors[i], names[i].c_str(), device);
    GC_CHECK(tensors[i].dim() >= 1, where, ": ", names[i],
             " must have a token dim (dim 0), got a 0-d tensor");
    GC_CHECK(tensors[i].size(0) == tensors[0].size(0), where, ": ", names[i], " has ",
             tensors[i].size(0), " rows (dim 0) but ", names[0], " has ", tensors[0].size(0),
             " tokens");
  }
}

}  // namespace

NaiveAll2All::NaiveAll2All(DeviceCommunicator& communicator, Device device,
                           std::shared_ptr<ProcessGroup> count_group, std::string name)
    : communicator_(communicator),
      device_(device),
      count_group_(std::move(count_group)),
      name_(std::move(name)) {}

std::vector<std::int64_t> NaiveAll2All::exchange_counts(std::int64_t local_count) {
  std::vector<std::int64_t> counts(count_group_->size());
  count_group_->all_gather(&local_count, counts.data(), 1, DType::Int64);
  return counts;
}

std::vector<Tensor> NaiveAll2All::dispatch(const char* op, const std::vector<Tensor>& tensors,
                                           const std::vector<std::string>& names) {
  const OpLabel where{name_, op};
  std::exception_ptr local_error;
  try {
    check_dispatch_inputs(where, tensors, names, device_);
  } catch (const std::invalid_argument&) {
    local_error = std::current_exception();
  }
  // Every rank takes part in the exchange even with bad inputs, so all of them learn about it.
  const std::vector<std::int64_t> counts =
      exchange_counts(local_error ? kInvalidCount : tensors[0].size(0));
  if (local_error) std::rethrow_exception(local_error);
  for (std::size_t r = 0; r < counts.size(); ++r) {
    GC_CHECK(counts[r] != kInvalidCount, where, ": rank ", r,
             " of the group passed invalid inputs (see its error)");
  }
  std::vector<Tensor> gathered = communicator_.all_gatherv(tensors, 0, counts);
  last_counts_ = counts;
  return gathered;
}

DispatchGather NaiveAll2All::as_gather() {
  return [this](const char* op, const std::vector<Tensor>& tensors,
                const std::vector<std::string>& names) { return dispatch(op, tensors, names); };
}

Tensor NaiveAll2All::combine(const Tensor& hidden_states) {
  const OpLabel where{name_, "combine"};
  GC_CHECK(last_counts_.has_value(), where,
           ": no dispatch came first (combine returns the tokens of the last dispatch)");
  check_tensor_on(where, hidden_states, "hidden_states", device_);
  GC_CHECK(hidden_states.dim() >= 1, where, ": hidden_states must have a token dim (dim 0)");
  const std::int64_t total =
      std::accumulate(last_counts_->begin(), last_counts_->end(), std::int64_t{0});
  GC_CHECK(hidden_states.size(0) == total, where, ": hidden_states has ", hidden_states.size(0),
           " rows (dim 0) but the last dispatch gathered ", total, " tokens");
  return communicator_.reduce_scatterv(hidden_states, 0, *last_counts_);
}

}  // namespace comm
}  // namespace groupcoord
