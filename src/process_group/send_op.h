// A posted point-to-point send: header, then payload (see p2p_protocol.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "process_group/async_op.h"
#include "process_group/p2p_protocol.h"

namespace groupcoord {

/// Send of `nbytes` at `data` to `dst` on `tag`. The constructor posts both messages, so the
/// caller must construct SendOps of one (dst, tag) stream in order (the group's mutex does it).
class SendOp : public AsyncOp {
 public:
  SendOp(std::shared_ptr<gloo::Context> context, std::shared_ptr<GroupHealth> health,
         std::string description, std::chrono::milliseconds timeout, const void* data,
         std::size_t nbytes, int dst, std::uint32_t tag);
  ~SendOp() override;

 protected:
  void run() override;
  void abort_waits_locked() override;
  void release() override;

 private:
  P2PHeader header_;
  std::unique_ptr<gloo::transport::UnboundBuffer> header_buffer_;
  std::unique_ptr<gloo::transport::UnboundBuffer> payload_buffer_;  ///< null for 0 bytes
};

}  // namespace groupcoord
