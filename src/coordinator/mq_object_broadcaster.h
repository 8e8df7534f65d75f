// The shared-memory MessageQueue as the coordinator's broadcast_object fast path (vLLM's
// mq_broadcaster), and the factories behind create_mq_broadcaster.
#pragma once

#include <memory>
#include <string>

#include "coordinator/object_broadcaster.h"
#include "groupcoord/message_queue.h"
#include "groupcoord/process_group.h"

namespace groupcoord {
namespace coordinator_detail {

/// vLLM's sizes for every coordinator-made queue: 6 chunks of 4 MiB.
inline constexpr std::size_t kMqChunkBytes = std::size_t{1} << 22;
inline constexpr std::size_t kMqChunks = 6;

/// Collective over `cpu_group`: a MessageQueue written by group rank 0, wrapped as an
/// ObjectBroadcaster. Returns nullptr (logged, on every rank alike) when the queue cannot serve
/// the group, e.g. readers on another node: broadcast_object then stays on the CPU group.
std::unique_ptr<ObjectBroadcaster> make_mq_object_broadcaster(
    const std::shared_ptr<ProcessGroup>& cpu_group, const std::string& unique_name);

}  // namespace coordinator_detail
}  // namespace groupcoord
