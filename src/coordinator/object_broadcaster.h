// ObjectBroadcaster: an optional fast path for GroupCoordinator::broadcast_object, the role of
// vLLM's mq_broadcaster (a shared-memory message queue written by group rank 0 and read by the
// others).
//
// The coordinator holds at most one. Without one, broadcast_object travels over the CPU group as
// size + bytes. The constructor installs an adapter over the shared-memory MessageQueue
// (mq_object_broadcaster.cc) for use_message_queue_broadcaster && world_size > 1, unless the
// queue cannot be made (every rank then falls back together); broadcasts from a src other than
// the queue's writer keep using the CPU group (vLLM asserts src == 0 instead).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "groupcoord/bytes.h"

namespace groupcoord {

class MessageQueue;

namespace coordinator_detail {

/// See the file comment.
class ObjectBroadcaster {
 public:
  virtual ~ObjectBroadcaster() = default;
  /// Group rank of the only rank that may be the source.
  virtual int writer_rank() const = 0;
  /// Collective over the group: `obj` (non-null exactly on the writer) to every rank. Returns the
  /// object on the readers and nullopt on the writer, whose caller has it.
  virtual std::optional<Bytes> broadcast_object(const Bytes* obj) = 0;
  /// The writer's side of broadcast_object when it has no object: the readers' broadcast_object
  /// throws SourceFailedError carrying `why`.
  virtual void broadcast_failure(const std::string& why) = 0;
  /// The shared-memory queue behind it, if any (GroupCoordinator::mq_broadcaster()).
  virtual std::shared_ptr<MessageQueue> queue() const { return nullptr; }
};

}  // namespace coordinator_detail
}  // namespace groupcoord
