// The writer's side of a MessageQueue's readers on other nodes: one TCP connection per remote
// reader, each message sent as a u64 length and the bytes (vLLM serves such readers over a ZeroMQ
// socket; shared memory cannot reach them). The kernel's socket buffers play the ring's part: a
// writer waits only when a reader has fallen that far behind, and then within its deadline.
//
// Set-up (MessageQueue's collective factory in message_queue.cc, collective over the queue's
// group): the writer listens on an ephemeral port of its address for peers (GLOO_SOCKET_IFNAME's
// interface, else its host name's address), broadcasts that endpoint and a random token, the remote
// readers connect and present the token and their group rank, and the writer accepts exactly them
// within the group's timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/deadline.h"
#include "groupcoord/bytes.h"
#include "store/socket.h"

namespace groupcoord {
namespace shm {

/// How the stream frames a message (a u64 size word, chunk_frame.h, then the bytes). A build
/// that frames it differently must have another number: the writer and each remote reader
/// compare theirs when they meet, so that ranks of different groupcoord builds get an error that
/// says so instead of misreading the flag bits. Builds before the check sent 0.
constexpr std::uint32_t kRemoteStreamVersion = 1;

/// What the writer broadcasts to every rank of the group (fixed size, plain bytes). Its size and
/// the place of every field before `stream_version` are those of the builds before the versions,
/// whose writers sent zeros where `stream_version` is (the start of their error text, empty when
/// ok): a reader of this build then sees version 0 instead of failing the broadcast.
struct RemoteEndpoint {
  char host[64] = {};  ///< numeric address the remote readers connect to
  std::int32_t port = 0;
  std::int32_t ok = 0;  ///< 0: the writer could not listen (error says why)
  std::uint64_t token = 0;
  std::uint32_t stream_version = kRemoteStreamVersion;  ///< the writer's
  std::uint32_t reserved = 0;
  char error[152] = {};
};
static_assert(sizeof(RemoteEndpoint) == 240 && offsetof(RemoteEndpoint, stream_version) == 80,
              "the endpoint's layout is what every build broadcasts: change it only with a new "
              "kRemoteStreamVersion, and keep the version where older builds can be told apart");
static_assert(std::is_trivially_copyable_v<RemoteEndpoint>, "sent as plain bytes");

/// The first bytes a remote reader sends on its connection (builds before the versions sent 0
/// where `stream_version` is).
struct RemoteHello {
  std::uint64_t token = 0;
  std::int32_t rank = -1;                               ///< the reader's group rank
  std::uint32_t stream_version = kRemoteStreamVersion;  ///< the reader's
};
static_assert(sizeof(RemoteHello) == 16 && offsetof(RemoteHello, stream_version) == 12,
              "the hello's layout is what every build sends");
static_assert(std::is_trivially_copyable_v<RemoteHello>, "sent as plain bytes");

/// "version V" for errors, saying what version 0 means.
std::string stream_version_text(std::uint32_t version);

class RemoteFanout {
 public:
  /// Starts listening for `reader_ranks` (group ranks); `endpoint` is what the writer
  /// broadcasts. On failure endpoint.ok is 0 and the fanout accepts nobody.
  RemoteFanout(std::string label, std::vector<int> reader_ranks, RemoteEndpoint* endpoint);

  /// Accepts the connection of every remote reader before `deadline`; "" on success, else why
  /// not (the caller makes every rank agree before anyone throws). A reader that presents the
  /// token with another kRemoteStreamVersion ends it at once, naming both versions.
  std::string accept_all(const Deadline& deadline);

  /// Sends `message` to every remote reader, its length word flagged with kWriterFailureBit
  /// (chunk_frame.h) when it is the writer's failure text. TimeoutError when a reader does not
  /// drain its connection in time, DistributedError when one is gone; either leaves that reader's
  /// stream unusable (is_broken()).
  void send(const Bytes& message, bool writer_failure, const Deadline& deadline);

  bool is_broken() const { return broken_; }
  /// Whether group rank `rank` is one of the remote readers.
  bool serves(int rank) const;
  std::size_t size() const { return reader_ranks_.size(); }

  /// The numeric IPv4 address peers on other nodes can reach this process at:
  /// GLOO_SOCKET_IFNAME's interface when set, else the address this host's name resolves to
  /// (not loopback), else the first non-loopback interface, else 127.0.0.1.
  static std::string address_for_peers();

 private:
  std::string label_;
  std::vector<int> reader_ranks_;
  std::uint64_t token_ = 0;
  store_internal::UniqueFd listener_;
  std::vector<store_internal::UniqueFd> connections_;  ///< by reader_ranks_ index
  bool broken_ = false;
};

}  // namespace shm
}  // namespace groupcoord
