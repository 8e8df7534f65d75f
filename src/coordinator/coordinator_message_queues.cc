// GroupCoordinator's shared-memory message queues (vLLM's create_mq_broadcaster and
// create_single_reader_mq_broadcasters).
#include <memory>
#include <vector>

#include "coordinator/group_coordinator_impl.h"
#include "coordinator/mq_object_broadcaster.h"
#include "groupcoord/check.h"
#include "groupcoord/group_coordinator.h"
#include "groupcoord/message_queue.h"

namespace groupcoord {

std::shared_ptr<MessageQueue> GroupCoordinator::create_mq_broadcaster(int writer_rank,
                                                                      bool blocking) {
  return create_mq_broadcaster(writer_rank, std::nullopt, blocking);
}

std::shared_ptr<MessageQueue> GroupCoordinator::create_mq_broadcaster(
    int writer_rank, const std::optional<MessageQueue::Handle>& external_writer_handle,
    bool blocking) {
  Impl& s = *impl_;
  s.check_alive("create_mq_broadcaster");
  GC_CHECK(writer_rank >= 0 && writer_rank < s.world_size, s.label("create_mq_broadcaster"),
           ": writer_rank ", writer_rank, " is out of range for a group of ", s.world_size);
  return MessageQueue::create_from_process_group(s.cpu_group, coordinator_detail::kMqChunkBytes,
                                                 coordinator_detail::kMqChunks, writer_rank,
                                                 external_writer_handle, blocking);
}

std::vector<std::shared_ptr<MessageQueue>> GroupCoordinator::create_single_reader_mq_broadcasters(
    int reader_rank_in_group, bool blocking) {
  Impl& s = *impl_;
  s.check_alive("create_single_reader_mq_broadcasters");
  GC_CHECK(reader_rank_in_group >= 0 && reader_rank_in_group < s.world_size,
           s.label("create_single_reader_mq_broadcasters"), ": reader_rank_in_group ",
           reader_rank_in_group, " is out of range for a group of ", s.world_size);
  auto queues = MessageQueue::create_from_process_group_single_reader(
      s.cpu_group, coordinator_detail::kMqChunkBytes, coordinator_detail::kMqChunks,
      reader_rank_in_group, blocking);
  return {std::make_move_iterator(queues.begin()), std::make_move_iterator(queues.end())};
}

bool GroupCoordinator::has_mq_broadcaster() const { return impl_->mq_broadcaster != nullptr; }

std::shared_ptr<MessageQueue> GroupCoordinator::mq_broadcaster() const {
  return impl_->mq_broadcaster ? impl_->mq_broadcaster->queue() : nullptr;
}

}  // namespace groupcoord
