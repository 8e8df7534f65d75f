#include "coordinator/mq_object_broadcaster.h"

#include <stdexcept>

#include "groupcoord/logging.h"

namespace groupcoord {
namespace coordinator_detail {

namespace {

class MqObjectBroadcaster final : public ObjectBroadcaster {
 public:
  explicit MqObjectBroadcaster(std::unique_ptr<MessageQueue> queue) : queue_(std::move(queue)) {}
  int writer_rank() const override { return 0; }
  std::optional<Bytes> broadcast_object(const Bytes* obj) override {
    if (obj == nullptr) return queue_->dequeue();
    queue_->enqueue(*obj);
    return std::nullopt;
  }
  void broadcast_failure(const std::string& why) override { queue_->enqueue_error(why); }
  std::shared_ptr<MessageQueue> queue() const override { return queue_; }

 private:
  std::shared_ptr<MessageQueue> queue_;  // shared: callers of mq_broadcaster() may outlive us
};

}  // namespace

std::unique_ptr<ObjectBroadcaster> make_mq_object_broadcaster(
    const std::shared_ptr<ProcessGroup>& cpu_group, const std::string& unique_name) {
  try {
    auto queue = MessageQueue::create_from_process_group(cpu_group, kMqChunkBytes, kMqChunks,
                                                         /*writer_rank=*/0, /*blocking=*/true);
    return std::make_unique<MqObjectBroadcaster>(std::move(queue));
  } catch (const std::invalid_argument& e) {
    // Every rank of the group reaches the same verdict inside the collective creation, so all of
    // them fall back together and the CPU-group path stays in step.
    GC_LOG(Info, unique_name, ": shared-memory broadcaster disabled (", e.what(),
           "); broadcast_object uses the CPU group");
    return nullptr;
  }
}

}  // namespace coordinator_detail
}  // namespace groupcoord
