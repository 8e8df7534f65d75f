#include "process_group/recv_op.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <sstream>

#include "groupcoord/errors.h"

namespace groupcoord {

RecvOp::RecvOp(std::shared_ptr<gloo::Context> context, std::shared_ptr<GroupHealth> health,
               std::string description, std::chrono::milliseconds timeout, void* data,
               std::size_t nbytes, int src, std::uint32_t tag, std::shared_ptr<RecvStream> stream)
    : AsyncOp(std::move(context), std::move(health), std::move(description), timeout),
      data_(data),
      nbytes_(nbytes),
      src_(src),
      tag_(tag),
      stream_(std::move(stream)) {
  header_.magic = 0;  // so a header that never arrived cannot pass for a valid one
  header_buffer_ = this->context()->createUnboundBuffer(&header_, sizeof(header_));
  header_buffer_->recv(src, header_slot(tag));
  std::lock_guard<std::mutex> lock(stream_->mutex);
  ticket_ = stream_->next_ticket++;
}

RecvOp::~RecvOp() = default;

void RecvOp::run() {
  try {
    wait_recv(*header_buffer_);
    check_header();
    const bool has_payload = post_payload_in_turn();
    if (has_payload) wait_recv(*payload_buffer_);
  } catch (...) {
    // Without our payload receive the stream's later receives would take our bytes.
    if (!took_turn_) poison_stream(description() + " failed before its payload was received");
    throw;
  }
  if (header_.nbytes != nbytes_) {
    std::ostringstream what;
    what << "the sender sent " << header_.nbytes << " bytes, but " << nbytes_
         << " were expected (the message was dropped; the stream stays usable)";
    throw final_error(what.str());
  }
}

void RecvOp::check_header() {
  if (header_.magic == P2PHeader::kMagic && header_.tag == tag_) return;
  std::ostringstream what;
  what << "received a corrupt message header (magic 0x" << std::hex << header_.magic << std::dec
       << ", tag " << header_.tag << "): the peer does not speak this protocol";
  mutable_health().mark_broken(health().label() + ": " + description() + ": " + what.str());
  throw final_error(what.str());
}

bool RecvOp::post_payload_in_turn() {
  std::unique_lock<std::mutex> lock(stream_->mutex);
  const bool in_turn = stream_->turn_changed.wait_until(lock, deadline(), [this] {
    return stream_->turn == ticket_ || stream_->poisoned || aborted();
  });
  if (stream_->poisoned) throw final_error(stream_->poison_reason);
  if (aborted()) throw final_error("aborted while waiting for an earlier receive of the stream");
  if (!in_turn) {
    throw FinalError{std::make_exception_ptr(
        TimeoutError(health().label() + ": " + description() + ": timed out waiting for an " +
                     "earlier receive from the same rank and tag"))};
  }
  bool posted = false;
  if (header_.nbytes > 0) {
    void* target = data_;
    if (header_.nbytes != nbytes_) {
      scratch_.resize(header_.nbytes);
      target = scratch_.data();
    }
    std::lock_guard<std::mutex> op_lock(mutex());  // abort() may look at payload_buffer_
    payload_buffer_ = context()->createUnboundBuffer(target, header_.nbytes);
    payload_buffer_->recv(src_, payload_slot(tag_));
    if (aborted()) payload_buffer_->abortWaitRecv();
    posted = true;
  }
  took_turn_ = true;
  ++stream_->turn;
  stream_->turn_changed.notify_all();
  return posted;
}

void RecvOp::poison_stream(const std::string& why) {
  std::lock_guard<std::mutex> lock(stream_->mutex);
  if (!stream_->poisoned) {
    stream_->poisoned = true;
    stream_->poison_reason = "an earlier receive of this stream failed: " + why;
  }
  stream_->turn_changed.notify_all();
}

void RecvOp::abort_waits_locked() {
  header_buffer_->abortWaitRecv();
  if (payload_buffer_) payload_buffer_->abortWaitRecv();
}

void RecvOp::after_abort() {
  // Wake a turn wait; taking the stream's lock orders this after the waiter's predicate check.
  std::lock_guard<std::mutex> lock(stream_->mutex);
  stream_->turn_changed.notify_all();
}

void RecvOp::release() {
  // No lock: complete() marked the op done first, after which abort() no longer touches them.
  header_buffer_.reset();
  payload_buffer_.reset();
  scratch_ = {};
}

}  // namespace groupcoord
