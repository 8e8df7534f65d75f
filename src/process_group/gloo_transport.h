// The Gloo transport shared by a world group and all of its sub-groups: one TCP device (one
// listening socket and one event-loop thread) and the waiter threads of async transfers.
#pragma once

#include <memory>
#include <string>

#include "groupcoord/process_group.h"
#include "process_group/waiter_pool.h"

namespace gloo {
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace groupcoord {

/// Where the Gloo device binds, as chosen from the options and the environment.
struct TransportAddress {
  std::string hostname;  ///< address or host name to bind (empty when `iface` is set)
  std::string iface;     ///< network interface to bind (GLOO_SOCKET_IFNAME)
  std::string reason;    ///< why this one, for logs and error messages
};

/// Applies the bind rule: options.bind_address; else GLOO_SOCKET_IFNAME (its first entry); else
/// 127.0.0.1 when single_node; else this host's name if it resolves to an address we can bind,
/// falling back to 127.0.0.1 with a warning.
TransportAddress choose_transport_address(const ProcessGroupOptions& options);

/// One world's TCP device and waiter pool. Groups hold it through shared_ptr; it goes away with
/// the last of them.
class GlooTransport {
 public:
  /// Creates the device. Throws std::invalid_argument when the address or interface cannot be
  /// used.
  static std::shared_ptr<GlooTransport> create(const ProcessGroupOptions& options);

  ~GlooTransport();

  /// The TCP device every context of this world connects through.
  std::shared_ptr<gloo::transport::Device>& device() { return device_; }
  /// Threads that complete isend/irecv.
  WaiterPool& waiters() { return waiters_; }
  /// Human-readable description of the device ("tcp 127.0.0.1 (single node)").
  const std::string& description() const { return description_; }

 private:
  GlooTransport() = default;

  // Members die in reverse order: the pool joins its threads (which may still be releasing
  // buffers of contexts on the device) before the device goes.
  std::shared_ptr<gloo::transport::Device> device_;
  WaiterPool waiters_;
  std::string description_;
};

}  // namespace groupcoord
