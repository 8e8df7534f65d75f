// A MessageQueue reader on another node than its writer: it connects to the writer's
// RemoteFanout (remote_fanout.h says how they meet) and reads each message as a u64 length and
// the bytes. A dequeue that times out keeps what arrived, so the next one resumes the message:
// nothing is lost, as with the ring.
#pragma once

#include <cstdint>
#include <string>

#include "core/deadline.h"
#include "groupcoord/bytes.h"
#include "shm/chunk_frame.h"
#include "shm/remote_fanout.h"
#include "store/socket.h"

namespace groupcoord {
namespace shm {

class RemoteInbox {
 public:
  /// Connects to the writer at `endpoint` as group rank `rank` before `deadline`; "" in `*error`
  /// on success, else why not (the caller makes every rank agree before anyone throws).
  RemoteInbox(std::string label, std::string writer, const RemoteEndpoint& endpoint, int rank,
              const Deadline& deadline, std::string* error);

  /// The next message; `*writer_failed` says whether it is the writer's failure text
  /// (MessageQueue::enqueue_error). TimeoutError when it has not fully arrived by `deadline` (the
  /// next call resumes it), DistributedError when the writer closed the connection or died.
  Bytes receive(const Deadline& deadline, bool* writer_failed);

 private:
  /// Reads into `data` until `size` bytes are there (`*have` counts them across calls); false
  /// when the deadline came first.
  bool fill(char* data, std::size_t size, std::size_t* have, const Deadline& deadline);

  std::string label_;
  std::string writer_;  ///< "rank 3", for errors
  store_internal::UniqueFd fd_;
  std::uint64_t length_ = 0;
  std::size_t length_have_ = 0;  ///< bytes of length_ received
  Bytes message_;
  std::size_t message_have_ = 0;
};

}  // namespace shm
}  // namespace groupcoord
