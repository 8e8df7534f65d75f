// A posted point-to-point receive: header first, then the payload (see p2p_protocol.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "process_group/async_op.h"
#include "process_group/p2p_protocol.h"

namespace groupcoord {

/// Receive of `nbytes` into `data` from `src` on `tag`. The constructor posts the header receive
/// and takes a ticket of `stream`, so RecvOps of one (src, tag) stream must be constructed in
/// order (the group's mutex does it); run() posts the payload receive when the ticket's turn
/// comes.
class RecvOp : public AsyncOp {
 public:
  RecvOp(std::shared_ptr<gloo::Context> context, std::shared_ptr<GroupHealth> health,
         std::string description, std::chrono::milliseconds timeout, void* data, std::size_t nbytes,
         int src, std::uint32_t tag, std::shared_ptr<RecvStream> stream);
  ~RecvOp() override;

 protected:
  void run() override;
  void abort_waits_locked() override;
  void after_abort() override;
  void release() override;

 private:
  /// Checks the received header; throws FinalError for a corrupt or foreign one.
  void check_header();
  /// Waits for this op's turn in the stream, then posts the payload receive (or skips it for an
  /// empty payload) and passes the turn on. Returns whether a payload receive was posted.
  bool post_payload_in_turn();
  /// Marks the stream unusable (later receives fail instead of taking the wrong bytes).
  void poison_stream(const std::string& why);

  void* const data_;
  const std::size_t nbytes_;
  const int src_;
  const std::uint32_t tag_;
  const std::shared_ptr<RecvStream> stream_;
  std::uint64_t ticket_ = 0;
  bool took_turn_ = false;

  P2PHeader header_;
  std::vector<std::uint8_t> scratch_;  ///< receives a payload whose size was not the expected one
  std::unique_ptr<gloo::transport::UnboundBuffer> header_buffer_;
  std::unique_ptr<gloo::transport::UnboundBuffer> payload_buffer_;  ///< set in run(), under mutex()
};

}  // namespace groupcoord
