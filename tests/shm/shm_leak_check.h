// Checks, shared by the multi-process queue tests, that no /dev/shm segment of this job's
// processes outlives its queues.
#pragma once

#include <memory>

#include "groupcoord/process_group.h"

namespace groupcoord {
namespace testing {

/// Collective over `world`: fails the test (gtest EXPECT) for every /dev/shm/gcmq-* segment whose
/// name carries the pid of a process of `world`.
void expect_no_queue_segments_left(const std::shared_ptr<ProcessGroup>& world);

}  // namespace testing
}  // namespace groupcoord
