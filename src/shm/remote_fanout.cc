#include "shm/remote_fanout.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/shared_memory.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "shm/chunk_frame.h"

namespace groupcoord {
namespace shm {

namespace {

using store_internal::IoStatus;
using store_internal::UniqueFd;

void copy_text(char* out, std::size_t size, const std::string& text) {
  std::strncpy(out, text.c_str(), size - 1);
  out[size - 1] = '\0';
}

std::string ipv4_text(const sockaddr* addr) {
  char text[INET_ADDRSTRLEN] = {};
  const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
  return inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) ? text : "";
}

// The IPv4 address of interface `name`, or of the first non-loopback interface when `name` is
// empty; "" when there is none.
std::string interface_address(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (name.empty() ? (i->ifa_flags & IFF_LOOPBACK) != 0 : name != i->ifa_name) continue;
    found = ipv4_text(i->ifa_addr);
  }
  freeifaddrs(list);
  return found;
}

// The first non-loopback IPv4 address this host's name resolves to; "" when none.
std::string host_name_address() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &found) != 0) return "";
  std::string address;
  for (addrinfo* a = found; a != nullptr && address.empty(); a = a->ai_next) {
    const std::string text = ipv4_text(a->ai_addr);
    if (text.rfind("127.", 0) != 0) address = text;
  }
  freeaddrinfo(found);
  return address;
}

}  // namespace

std::string stream_version_text(std::uint32_t version) {
  return "version " + std::to_string(version) +
         (version == 0 ? " (a build from before the versions)" : "");
}

std::string RemoteFanout::address_for_peers() {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    std::string first(ifname);
    first = first.substr(0, first.find(','));
    return interface_address(first);
  }
  std::string address = host_name_address();
  if (address.empty()) address = interface_address("");
  // A machine without a network: only this machine's processes can be the "other node" (e.g.
  // another /dev/shm), and they reach loopback.
  return address.empty() ? std::string("127.0.0.1") : address;
}

RemoteFanout::RemoteFanout(std::string label, std::vector<int> reader_ranks,
                           RemoteEndpoint* endpoint)
    : label_(std::move(label)), reader_ranks_(std::move(reader_ranks)) {
  connections_.resize(reader_ranks_.size());
  *endpoint = RemoteEndpoint{};
  try {
    const std::string host = address_for_peers();
    listener_ = store_internal::listen_tcp(host, 0, static_cast<int>(reader_ranks_.size()) + 8);
    token_ = (random_token() << 1) | 1;  // never 0
    copy_text(endpoint->host, sizeof endpoint->host, host);
    endpoint->port = store_internal::local_port(listener_.get());
    endpoint->token = token_;
    endpoint->ok = 1;
  } catch (const std::exception& error) {
    copy_text(endpoint->error, sizeof endpoint->error, error.what());
  }
}

std::string RemoteFanout::accept_all(const Deadline& deadline) {
  if (!listener_.valid()) return label_ + ": the writer could not listen for remote readers";
  const auto until = store_internal::deadline_after(deadline.remaining());
  std::size_t connected = 0;
  while (connected < reader_ranks_.size()) {
    pollfd wait{listener_.get(), POLLIN, 0};
    const int ready = ::poll(&wait, 1, store_internal::poll_timeout_ms(until));
    if (ready == 0 || store_internal::Clock::now() >= until) {
      return label_ + ": " + std::to_string(reader_ranks_.size() - connected) + " of " +
             std::to_string(reader_ranks_.size()) +
             " remote reader(s) did not connect within the group's timeout";
    }
    if (ready < 0) continue;  // EINTR
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) continue;
    RemoteHello hello;
    int err = 0;
    if (store_internal::recv_exact(fd.get(), reinterpret_cast<char*>(&hello), sizeof hello, until,
                                   &err) != IoStatus::kOk ||
        hello.token != token_) {
      continue;  // a stranger, or a reader that gave up: not one of ours
    }
    const auto it = std::find(reader_ranks_.begin(), reader_ranks_.end(), hello.rank);
    if (it == reader_ranks_.end()) continue;
    if (hello.stream_version != kRemoteStreamVersion) {
      return label_ + ": remote reader rank " + std::to_string(hello.rank) +
             " frames messages as stream " + stream_version_text(hello.stream_version) +
             ", this writer as " + stream_version_text(kRemoteStreamVersion) +
             ": the ranks run different groupcoord builds";
    }
    UniqueFd& slot = connections_[static_cast<std::size_t>(it - reader_ranks_.begin())];
    if (slot.valid()) continue;
    store_internal::set_nodelay(fd.get());
    slot = std::move(fd);
    ++connected;
  }
  listener_.reset();  // nobody else may connect
  return "";
}

bool RemoteFanout::serves(int rank) const {
  return std::find(reader_ranks_.begin(), reader_ranks_.end(), rank) != reader_ranks_.end();
}

void RemoteFanout::send(const Bytes& message, bool writer_failure, const Deadline& deadline) {
  if (broken_) {
    GC_THROW(DistributedError, label_,
             ": enqueue: the queue is broken (the connection to a "
             "remote reader failed in an earlier enqueue)");
  }
  const auto until = store_internal::deadline_after(deadline.remaining());
  const std::uint64_t length = size_word(message.size(), writer_failure);
  for (std::size_t i = 0; i < connections_.size(); ++i) {
    int err = 0;
    IoStatus status = store_internal::send_all(
        connections_[i].get(), reinterpret_cast<const char*>(&length), sizeof length, until, &err);
    if (status == IoStatus::kOk && !message.empty()) {
      status = store_internal::send_all(connections_[i].get(), message.data(), message.size(),
                                        until, &err);
    }
    if (status == IoStatus::kOk) continue;
    broken_ = true;  // part of a message may be in the stream: nothing after it can be framed
    const std::string reader = "remote reader rank " + std::to_string(reader_ranks_[i]);
    if (status == IoStatus::kTimeout) {
      GC_THROW(TimeoutError, label_, ": enqueue timed out after ", deadline.timeout().count(),
               " ms sending to ", reader, " (it stopped reading; the queue is now broken)");
    }
    GC_THROW(DistributedError, label_, ": enqueue: ", reader, " is gone (",
             store_internal::io_status_text(status, err), ")");
  }
}

}  // namespace shm
}  // namespace groupcoord
