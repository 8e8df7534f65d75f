// One point-to-point transfer in flight, and the Work handle that exposes it.
//
// Life cycle: the group posts the transfer (SendOp / RecvOp constructors post their Gloo
// operations), then exactly one thread calls complete() - a waiter thread for isend/irecv, the
// caller for send/recv - which blocks in Gloo's waitSend/waitRecv, bounded by the group's timeout,
// and records the outcome. abort() (from destroy()) makes a pending complete() return early. Once
// complete() returns, the Gloo buffers and the context they pin are released, so finished Work
// handles hold no transport resources.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "groupcoord/work.h"
#include "process_group/group_health.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace groupcoord {

/// Base of SendOp and RecvOp: outcome recording, waiting and aborting. Thread-safe.
class AsyncOp {
 public:
  virtual ~AsyncOp();
  AsyncOp(const AsyncOp&) = delete;
  AsyncOp& operator=(const AsyncOp&) = delete;

  /// Drives the transfer to its end (success, error, timeout or abort) and records the outcome.
  /// Called exactly once, on one thread.
  void complete();
  /// Makes a pending complete() return with a DistributedError naming `why`. No effect once
  /// completed.
  void abort(const std::string& why);

  /// True once complete() has recorded an outcome.
  bool is_completed() const;
  /// Waits up to `timeout` for the outcome; false if it is not there yet.
  bool wait_for(std::chrono::milliseconds timeout) const;
  /// The recorded error (null on success or while pending).
  std::exception_ptr error() const;

  /// E.g. "isend(dst=1, tag=3, 4096 bytes)".
  const std::string& description() const { return description_; }
  /// The owning group's health (its label names the group in messages).
  const GroupHealth& health() const { return *health_; }
  /// The group's timeout, which bounds complete().
  std::chrono::milliseconds timeout() const { return timeout_; }

 protected:
  /// Thrown by run() for an outcome that is already a final groupcoord error (no mapping).
  struct FinalError {
    std::exception_ptr error;
  };

  AsyncOp(std::shared_ptr<gloo::Context> context, std::shared_ptr<GroupHealth> health,
          std::string description, std::chrono::milliseconds timeout);

  /// The transfer itself; returns on success. Gloo errors propagate (complete() maps them).
  virtual void run() = 0;
  /// Interrupts the Gloo waits of run(); called with mutex() held.
  virtual void abort_waits_locked() = 0;
  /// Called after abort_waits_locked(), without any lock (e.g. to wake other waits).
  virtual void after_abort() {}
  /// Drops the Gloo buffers once the outcome is recorded.
  virtual void release() = 0;

  /// Waits for `buffer`'s posted send (or recv) within the time left; throws FinalError when the
  /// wait was aborted.
  void wait_send(gloo::transport::UnboundBuffer& buffer);
  void wait_recv(gloo::transport::UnboundBuffer& buffer);
  /// Time left before this op's deadline (at least 1 ms, so Gloo still reports its timeout).
  std::chrono::milliseconds time_left() const;
  /// A FinalError carrying DistributedError("<label>: <description>: <what>").
  FinalError final_error(const std::string& what) const;

  bool aborted() const { return aborted_.load(); }
  std::mutex& mutex() const { return mutex_; }
  const std::shared_ptr<gloo::Context>& context() const { return context_; }
  GroupHealth& mutable_health() { return *health_; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

 private:
  const std::shared_ptr<GroupHealth> health_;
  const std::string description_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::steady_clock::time_point deadline_;

  mutable std::mutex mutex_;
  mutable std::condition_variable done_cv_;
  std::shared_ptr<gloo::Context> context_;
  bool done_ = false;
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
  std::exception_ptr error_;
};

/// The Work returned by isend/irecv.
class AsyncWork : public Work {
 public:
  explicit AsyncWork(std::shared_ptr<AsyncOp> op) : op_(std::move(op)) {}

  bool is_completed() override;
  void wait() override;
  void wait(std::chrono::milliseconds timeout) override;

 private:
  std::shared_ptr<AsyncOp> op_;
};

}  // namespace groupcoord
