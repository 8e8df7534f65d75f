// compute_model_parallel_layout: vLLM's group orders, computed without torch.
//
// vLLM arranges the world as all_ranks = arange(W).reshape(-1, DP, PP, PCP, TP) and, for each group
// kind, moves that kind's axis last (a transpose), flattens, and cuts the result into rows of the
// group size: all_ranks.transpose(a, 4).reshape(-1, size).unbind(0). The order of the groups in the
// list matters (it is the order in which every rank creates them), so it is reproduced exactly.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "groupcoord/check.h"
#include "groupcoord/parallel_state.h"

namespace groupcoord {

namespace {

// Axes of vLLM's 5-d rank array, outermost first (axis 0 is the external DP).
constexpr int kDp = 1;
constexpr int kPp = 2;
constexpr int kPcp = 3;
constexpr int kTp = 4;
constexpr int kAxes = 5;

using Dims = std::array<int, kAxes>;
using Groups = std::vector<std::vector<int>>;

// torch's arange(W).reshape(dims).permute(order).reshape(-1, group_size).unbind(0): walks the
// permuted array in row-major order and cuts the ranks it meets into rows of `group_size`.
Groups groups_of(const Dims& dims, const Dims& order, int group_size) {
  Dims strides{};
  int stride = 1;
  for (int axis = kAxes - 1; axis >= 0; --axis) {
    strides[axis] = stride;
    stride *= dims[axis];
  }
  const int world_size = stride;
  Groups groups;
  std::vector<int> current;
  Dims index{};  // index into the permuted array: index[k] runs over dims[order[k]]
  for (int visited = 0; visited < world_size; ++visited) {
    int rank = 0;
    for (int k = 0; k < kAxes; ++k) rank += index[k] * strides[order[k]];
    current.push_back(rank);
    if (static_cast<int>(current.size()) == group_size) {
      groups.push_back(std::move(current));
      current.clear();
    }
    for (int k = kAxes - 1; k >= 0; --k) {  // row-major increment of the permuted index
      if (++index[k] < dims[order[k]]) break;
      index[k] = 0;
    }
  }
  return groups;
}

// The axis order after torch's transpose(a, b) of the identity order.
Dims swapped(int a, int b) {
  Dims order{0, 1, 2, 3, 4};
  std::swap(order[a], order[b]);
  return order;
}

void check_sizes(int world_size, int tp, int pp, int pcp, int dcp, int dp) {
  const std::string sizes = detail::concat(
      "(world_size=", world_size, ", tensor_model_parallel_size=", tp,
      ", pipeline_model_parallel_size=", pp, ", prefill_context_model_parallel_size=", pcp,
      ", decode_context_model_parallel_size=", dcp, ", data_parallel_size=", dp, ")");
  GC_CHECK(world_size > 0 && tp > 0 && pp > 0 && pcp > 0 && dcp > 0 && dp > 0,
           "initialize_model_parallel: every size must be positive ", sizes);
  const std::int64_t model_size = std::int64_t{dp} * pp * pcp * tp;
  GC_CHECK(world_size % model_size == 0, "initialize_model_parallel: data_parallel_size x ",
           "pipeline_model_parallel_size x prefill_context_model_parallel_size x ",
           "tensor_model_parallel_size = ", model_size, " does not divide the world size ", sizes);
  // DCP reuses the GPUs of the TP group: each TP group splits into TP / DCP decode groups.
  GC_CHECK(tp % dcp == 0, "initialize_model_parallel: decode_context_model_parallel_size must ",
           "divide tensor_model_parallel_size ", sizes);
}

}  // namespace

ModelParallelLayout compute_model_parallel_layout(int world_size, int tensor_model_parallel_size,
                                                  int pipeline_model_parallel_size,
                                                  int prefill_context_model_parallel_size,
                                                  int decode_context_model_parallel_size,
                                                  int data_parallel_size) {
  const int tp = tensor_model_parallel_size;
  const int pp = pipeline_model_parallel_size;
  const int pcp = prefill_context_model_parallel_size;
  const int dcp = decode_context_model_parallel_size;
  const int dp = data_parallel_size;
  check_sizes(world_size, tp, pp, pcp, dcp, dp);

  const Dims dims{world_size / (dp * pp * pcp * tp), dp, pp, pcp, tp};
  const Dims identity{0, 1, 2, 3, 4};
  ModelParallelLayout layout;
  layout.tp = groups_of(dims, identity, tp);
  // Contiguous chunks of each TP row (vLLM: all_ranks.reshape(-1, dcp)).
  layout.dcp = groups_of(dims, identity, dcp);
  layout.pcp = groups_of(dims, swapped(kPcp, kTp), pcp);
  layout.pp = groups_of(dims, swapped(kPp, kTp), pp);
  layout.dp = groups_of(dims, swapped(kDp, kTp), dp);
  // EP spans DP x PCP x TP: move PP out of the way (transpose(1, 2)) and take the inner three.
  layout.ep = groups_of(dims, swapped(kDp, kPp), dp * pcp * tp);
  return layout;
}

}  // namespace groupcoord
