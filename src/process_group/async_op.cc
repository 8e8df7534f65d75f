#include "process_group/async_op.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "process_group/gloo_errors.h"

namespace groupcoord {

AsyncOp::AsyncOp(std::shared_ptr<gloo::Context> context, std::shared_ptr<GroupHealth> health,
                 std::string description, std::chrono::milliseconds timeout)
    : health_(std::move(health)),
      description_(std::move(description)),
      timeout_(timeout),
      deadline_(std::chrono::steady_clock::now() + timeout),
      context_(std::move(context)) {}

AsyncOp::~AsyncOp() = default;

void AsyncOp::complete() {
  std::exception_ptr error;
  try {
    run();
  } catch (const FinalError& final) {
    error = final.error;
  } catch (...) {
    error = map_gloo_error(std::current_exception(), *health_, description_, timeout_);
  }
  std::shared_ptr<gloo::Context> context;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    done_ = true;
    context = std::move(context_);
  }
  done_cv_.notify_all();
  // Destroying the buffers unregisters them from their pairs (waiting for the transport's event
  // loop to let go of them) and may close the context if the group is gone: outside the lock.
  release();
  context.reset();
}

void AsyncOp::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_ || aborted_) return;
    abort_reason_ = why;
    aborted_ = true;
    // Gloo's abort flag persists inside the buffer, so this also works if complete() has not
    // started waiting yet.
    abort_waits_locked();
  }
  after_abort();
}

bool AsyncOp::is_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

bool AsyncOp::wait_for(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return done_cv_.wait_for(lock, timeout, [this] { return done_; });
}

std::exception_ptr AsyncOp::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

std::chrono::milliseconds AsyncOp::time_left() const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline_ - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

AsyncOp::FinalError AsyncOp::final_error(const std::string& what) const {
  return FinalError{std::make_exception_ptr(
      DistributedError(health_->label() + ": " + description_ + ": " + what))};
}

void AsyncOp::wait_send(gloo::transport::UnboundBuffer& buffer) {
  if (!buffer.waitSend(time_left())) {
    std::lock_guard<std::mutex> lock(mutex_);
    throw final_error("aborted: " + abort_reason_);
  }
}

void AsyncOp::wait_recv(gloo::transport::UnboundBuffer& buffer) {
  if (!buffer.waitRecv(time_left())) {
    std::lock_guard<std::mutex> lock(mutex_);
    throw final_error("aborted: " + abort_reason_);
  }
}

bool AsyncWork::is_completed() { return op_->is_completed(); }

void AsyncWork::wait() {
  // The op's own deadline (the group timeout, counted from when it was posted) expires first, so
  // the grace only makes sure we report its precise error rather than a race.
  wait(op_->timeout() + std::chrono::seconds(5));
}

void AsyncWork::wait(std::chrono::milliseconds timeout) {
  if (!op_->wait_for(timeout)) {
    GC_THROW(TimeoutError, op_->health().label(), ": wait for ", op_->description(),
             " timed out after ", timeout.count(), " ms (the transfer is still pending)");
  }
  if (auto error = op_->error()) std::rethrow_exception(error);
}

}  // namespace groupcoord
