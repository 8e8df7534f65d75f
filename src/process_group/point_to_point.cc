// Tagged point-to-point transfers (wire protocol: p2p_protocol.h). Each is an AsyncOp:
// isend/irecv hand it to a waiter thread, send/recv complete it on the calling thread. Either way
// the op is posted and registered under the group's mutex, which keeps the messages of one stream
// in posting order and lets destroy() find every transfer to wait for or abort.
#include <gloo/context.h>

#include <cstdint>
#include <sstream>

#include "groupcoord/check.h"
#include "groupcoord/process_group.h"
#include "process_group/gloo_errors.h"
#include "process_group/group_state.h"
#include "process_group/recv_op.h"
#include "process_group/send_op.h"

namespace groupcoord {

namespace {

std::string describe(const char* op, const char* peer_name, int peer, std::uint32_t tag,
                     std::size_t nbytes) {
  std::ostringstream out;
  out << op << "(" << peer_name << "=" << peer << ", tag=" << tag << ", " << nbytes << " bytes)";
  return out.str();
}

void check_peer(const ProcessGroup::State& s, const char* op, const char* peer_name, int peer,
                const void* data, std::size_t nbytes) {
  const std::string& label = s.health->label();
  GC_CHECK(peer >= 0 && peer < s.size, label, ": ", op, ": ", peer_name, " ", peer,
           " out of range [0, ", s.size, ")");
  GC_CHECK(peer != s.rank, label, ": ", op, ": ", peer_name, " ", peer, " is this rank itself");
  GC_CHECK(data != nullptr || nbytes == 0, label, ": ", op, ": null buffer with ", nbytes,
           " bytes");
}

/// Posts a send and registers it; the caller completes it.
std::shared_ptr<AsyncOp> post_send(ProcessGroup::State& s, const void* data, std::size_t nbytes,
                                   int dst, std::uint32_t tag, const char* op) {
  check_peer(s, op, "dst", dst, data, nbytes);
  const std::string what = describe(op, "dst", dst, tag, nbytes);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.health->check_usable(op);
  std::shared_ptr<AsyncOp> result;
  run_gloo_op(*s.health, what, s.timeout, [&] {
    result = std::make_shared<SendOp>(s.context, s.health, what, s.timeout, data, nbytes, dst, tag);
  });
  s.register_op_locked(result, op);
  return result;
}

/// Posts a receive and registers it; the caller completes it.
std::shared_ptr<AsyncOp> post_recv(ProcessGroup::State& s, void* data, std::size_t nbytes, int src,
                                   std::uint32_t tag, const char* op) {
  check_peer(s, op, "src", src, data, nbytes);
  const std::string what = describe(op, "src", src, tag, nbytes);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.health->check_usable(op);
  auto& stream = s.recv_streams[{src, tag}];
  if (!stream) stream = std::make_shared<RecvStream>();
  std::shared_ptr<AsyncOp> result;
  run_gloo_op(*s.health, what, s.timeout, [&] {
    result = std::make_shared<RecvOp>(s.context, s.health, what, s.timeout, data, nbytes, src, tag,
                                      stream);
  });
  s.register_op_locked(result, op);
  return result;
}

/// Hands `op` to a waiter thread and wraps it in a Work.
std::shared_ptr<Work> start(ProcessGroup::State& s, std::shared_ptr<AsyncOp> op) {
  std::shared_ptr<GlooTransport> transport;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    transport = s.transport;
  }
  if (transport) {
    transport->waiters().submit([op] { op->complete(); });
  } else {
    // destroy() ran between posting and here and has aborted the op: finish it inline.
    op->complete();
  }
  return std::make_shared<AsyncWork>(std::move(op));
}

/// Completes `op` on this thread and rethrows its error.
void finish(const std::shared_ptr<AsyncOp>& op) {
  op->complete();
  if (auto error = op->error()) std::rethrow_exception(error);
}

}  // namespace

void ProcessGroup::send(const void* data, std::size_t nbytes, int dst, std::uint32_t tag) {
  finish(post_send(*state_, data, nbytes, dst, tag, "send"));
}

void ProcessGroup::recv(void* data, std::size_t nbytes, int src, std::uint32_t tag) {
  finish(post_recv(*state_, data, nbytes, src, tag, "recv"));
}

std::shared_ptr<Work> ProcessGroup::isend(const void* data, std::size_t nbytes, int dst,
                                          std::uint32_t tag) {
  return start(*state_, post_send(*state_, data, nbytes, dst, tag, "isend"));
}

std::shared_ptr<Work> ProcessGroup::irecv(void* data, std::size_t nbytes, int src,
                                          std::uint32_t tag) {
  return start(*state_, post_recv(*state_, data, nbytes, src, tag, "irecv"));
}

}  // namespace groupcoord
