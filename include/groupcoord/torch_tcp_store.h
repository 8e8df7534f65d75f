// A client of PyTorch's c10d TCPStore (torch.distributed.TCPStore, and the store torchrun's agent
// hosts when it sets TORCHELASTIC_USE_AGENT_STORE=True). It speaks torch's wire protocol, written
// from its public description (docs/torch_store.md), so that a groupcoord job can rendezvous
// through a store torch already serves: rendezvous() uses it under torchrun, and engines may use
// it directly.
//
//   TorchTcpStoreOptions options;
//   options.host = "10.0.0.1";
//   options.port = 29500;                       // MASTER_PORT
//   auto store = TorchTcpStore::connect(options);
//   store->set("k", "v");                       // torch's client sees key "k" as well
//
// Keys are what a torch TCPStore client uses: on the wire each gets torch's leading "/", so a
// key set here is the same key for torch.distributed.TCPStore clients of that server.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/default_timeout.h"
#include "groupcoord/store.h"

namespace groupcoord {

/// Which generation of torch's protocol the server speaks (the command numbers moved twice).
enum class TorchStoreProtocol {
  kAuto,    ///< probe the server once at connect time (see TorchTcpStore::connect)
  kTorch1,  ///< torch 1.x and 2.0: no handshake, SET = 0 ... DELETE_KEY = 8
  kTorch2,  ///< torch 2.2 and later: a VALIDATE handshake first, SET = 1 ... CANCEL_WAIT = 12
};

/// "auto", "torch1", "torch2".
std::string to_string(TorchStoreProtocol protocol);
/// Parses "auto", "torch1"/"1", "torch2"/"2"; std::invalid_argument naming `what` otherwise.
TorchStoreProtocol parse_torch_store_protocol(const std::string& text, const std::string& what);

/// Settings of a TorchTcpStore.
struct TorchTcpStoreOptions {
  std::string host = "127.0.0.1";  ///< the server's address (MASTER_ADDR)
  int port = 0;                    ///< the server's port (MASTER_PORT)
  /// Deadline of get() and wait() when none is given, and of every other request.
  std::chrono::milliseconds timeout = default_timeout();
  /// How long connect() keeps trying to reach the server (it may start after this process).
  std::chrono::milliseconds connect_timeout = default_timeout();
  TorchStoreProtocol protocol = TorchStoreProtocol::kAuto;
};

/// A Store backed by a torch TCPStore server. Thread-safe: each request takes a connection of its
/// own from a small pool (torch's protocol carries one request at a time per connection), so a
/// long wait() on one thread never delays a set() on another. Every request is bounded by a
/// deadline; a wait that times out is cancelled on the server (torch 2) or its connection is
/// dropped (torch 1, which cannot cancel), so later replies never shift.
class TorchTcpStore : public Store {
 public:
  /// Connects to the server, retrying until options.connect_timeout while it is not up yet. With
  /// TorchStoreProtocol::kAuto the generation is probed on fresh connections: a VALIDATE + PING
  /// (echoed by torch >= 2.5), then torch 1's GETNUMKEYS, then VALIDATE + torch 2's GETNUMKEYS.
  /// Throws DistributedError naming host:port when no torch store answers, TimeoutError when the
  /// server cannot be reached in time.
  static std::shared_ptr<TorchTcpStore> connect(const TorchTcpStoreOptions& options);
  ~TorchTcpStore() override;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;

  /// The generation in use (never kAuto).
  TorchStoreProtocol protocol() const;
  /// "host:port".
  const std::string& endpoint() const;

  class Impl;

 private:
  explicit TorchTcpStore(std::unique_ptr<Impl> impl, std::chrono::milliseconds timeout);
  std::unique_ptr<Impl> impl_;
};

}  // namespace groupcoord
