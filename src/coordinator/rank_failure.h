// The rank-failure policy applied to a GroupCoordinator operation's error (world.h,
// RankFailurePolicy): under kIdentify a distributed error after which dead ranks are known
// becomes a RankFailureError naming them, so that an engine can catch it and shrink.
#pragma once

namespace groupcoord {
namespace coordinator_detail {

/// Rethrows the exception being handled (call it only inside a catch), turned into a
/// RankFailureError when the policy is kIdentify, it is a DistributedError (a timeout included)
/// and find_dead_ranks() names any rank. Any other exception, and every exception under kPlain,
/// is rethrown as it is.
[[noreturn]] void rethrow_under_failure_policy();

}  // namespace coordinator_detail
}  // namespace groupcoord
