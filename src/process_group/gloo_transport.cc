#include "process_group/gloo_transport.h"

#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {

namespace {

constexpr const char* kLoopback = "127.0.0.1";

/// True when `host` resolves to at least one address that a socket can bind (i.e. is local).
bool resolves_to_bindable_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return false;
  bool bindable = false;
  for (addrinfo* it = result; it != nullptr && !bindable; it = it->ai_next) {
    const int fd = socket(it->ai_family, it->ai_socktype, it->ai_protocol);
    if (fd < 0) continue;
    // Port 0 in the resolved address: the kernel picks one; we only ask whether the IP is ours.
    bindable = bind(fd, it->ai_addr, it->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(result);
  return bindable;
}

std::string this_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return {};
  return name;
}

/// Gloo's TCP pairs write with writev, which raises SIGPIPE when the peer's socket is closed (a
/// dead or failed rank): with the default action that kills this process instead of the operation
/// failing with EPIPE. So, once per process, SIGPIPE is ignored when nobody chose its action
/// (Python does the same at start-up; a handler the program installed is left alone).
void ignore_default_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
        (current.sa_flags & SA_SIGINFO) != 0) {
      return;
    }
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    if (sigaction(SIGPIPE, &ignore, nullptr) == 0) {
      GC_LOG(Debug,
             "process group: SIGPIPE ignored (it was the default action), so that a "
             "closed peer connection fails the operation instead of ending the process");
    }
  });
}

}  // namespace

TransportAddress choose_transport_address(const ProcessGroupOptions& options) {
  if (!options.bind_address.empty()) {
    return {options.bind_address, "", "ProcessGroupOptions::bind_address"};
  }
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    // torch accepts a comma-separated list (one device per entry); one device is enough here.
    std::string first(ifname);
    first = first.substr(0, first.find(','));
    return {"", first, "GLOO_SOCKET_IFNAME"};
  }
  if (options.single_node) return {kLoopback, "", "single node"};
  const std::string host = this_host_name();
  if (!host.empty() && resolves_to_bindable_address(host)) return {host, "", "host name"};
  GC_LOG(Warn, "process group: host name '", host, "' does not resolve to a local address; using ",
         kLoopback, " (set GLOO_SOCKET_IFNAME to choose an interface)");
  return {kLoopback, "", "loopback fallback"};
}

std::shared_ptr<GlooTransport> GlooTransport::create(const ProcessGroupOptions& options) {
  const TransportAddress address = choose_transport_address(options);
  gloo::transport::tcp::attr attr;
  attr.hostname = address.hostname;
  attr.iface = address.iface;
  const std::string where =
      (address.iface.empty() ? address.hostname : "interface " + address.iface) + " (" +
      address.reason + ")";
  std::shared_ptr<GlooTransport> transport(new GlooTransport());
  ignore_default_sigpipe();
  try {
    transport->device_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    GC_THROW(std::invalid_argument, "process group '", options.name,
             "': cannot create the Gloo TCP device on ", where, ": ", e.what());
  }
  transport->description_ = "tcp " + where;
  GC_LOG(Debug, "process group '", options.name, "': Gloo device ", transport->description_);
  return transport;
}

GlooTransport::~GlooTransport() = default;

}  // namespace groupcoord
