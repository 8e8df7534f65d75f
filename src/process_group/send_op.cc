#include "process_group/send_op.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

namespace groupcoord {

SendOp::SendOp(std::shared_ptr<gloo::Context> context, std::shared_ptr<GroupHealth> health,
               std::string description, std::chrono::milliseconds timeout, const void* data,
               std::size_t nbytes, int dst, std::uint32_t tag)
    : AsyncOp(std::move(context), std::move(health), std::move(description), timeout) {
  header_.tag = tag;
  header_.nbytes = nbytes;
  header_buffer_ = this->context()->createUnboundBuffer(&header_, sizeof(header_));
  if (nbytes > 0) {
    // Gloo only reads from a send buffer; its interface just takes non-const pointers.
    payload_buffer_ = this->context()->createUnboundBuffer(const_cast<void*>(data), nbytes);
  }
  header_buffer_->send(dst, header_slot(tag));
  if (payload_buffer_) payload_buffer_->send(dst, payload_slot(tag));
}

SendOp::~SendOp() = default;

void SendOp::run() {
  wait_send(*header_buffer_);
  if (payload_buffer_) wait_send(*payload_buffer_);
}

void SendOp::abort_waits_locked() {
  header_buffer_->abortWaitSend();
  if (payload_buffer_) payload_buffer_->abortWaitSend();
}

void SendOp::release() {
  // No lock: complete() marked the op done first, after which abort() no longer touches them.
  header_buffer_.reset();
  payload_buffer_.reset();
}

}  // namespace groupcoord
