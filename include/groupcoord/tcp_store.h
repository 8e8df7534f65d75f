// The TCP store: a single-threaded poll(2) server that world rank 0 (or a standalone
// `groupcoord-store-server`) hosts, and a client Store that every rank connects with.
//
//   TcpStoreOptions options;
//   options.host = "10.0.0.1";
//   options.port = 29500;
//   options.is_server = (rank == 0);
//   std::shared_ptr<TcpStore> store = TcpStore::create(options);
//   store->set("nccl_id", id);            // rank 0
//   Bytes id = store->get("nccl_id");     // other ranks: waits up to store->timeout()
//
// Waits are parked in the server and answered when the keys arrive or their deadline passes,
// so a waiting client costs no polling traffic. The wire protocol is private (src/store/).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/default_timeout.h"
#include "groupcoord/store.h"

namespace groupcoord {

/// Settings of a TcpStoreServer.
struct TcpStoreServerOptions {
  /// Address to bind: "127.0.0.1" (this machine only), "0.0.0.0" / "::" (every interface), or
  /// the address of one interface.
  std::string host = "127.0.0.1";
  /// Port to listen on; 0 picks a free one (read it back with TcpStoreServer::port()).
  int port = 0;
  /// Longest key accepted, in bytes.
  std::size_t max_key_bytes = 4 * 1024;
  /// Largest value accepted, in bytes (at most 1 GiB).
  std::size_t max_value_bytes = 256 * 1024 * 1024;
  /// Most keys one check() or wait() may name.
  std::size_t max_keys_per_request = 16 * 1024;
  /// Most bytes (keys plus values) the server holds at once; a set, add or compare_set that
  /// would go past it is refused (std::invalid_argument at the client), so no client can make
  /// the host swap. 0: no limit.
  std::size_t max_total_bytes = 1024 * 1024 * 1024;
  /// Most connections open at once from one peer address; a further one gets an error naming
  /// the limit and is closed. 0: no limit.
  std::size_t max_connections_per_peer = 4096;
  /// Shared secret every client must present in its handshake (at most 1024 bytes); a client
  /// with another token, or none, is refused. Empty: any client is served (the server should
  /// then bind loopback only or sit on a trusted network).
  std::string token;
};

/// The store server: one event-loop thread multiplexing every client with poll(2). Requests
/// are bounded by the limits in its options; a client that sends garbage, an unknown command,
/// an oversize or a truncated message gets an error reply (where possible) and is
/// disconnected, while other clients are served on. Thread-safe to stop from any thread.
class TcpStoreServer {
 public:
  /// Binds, listens and starts the event loop. Throws std::invalid_argument for bad options
  /// and DistributedError (naming host:port) when the address cannot be bound.
  static std::unique_ptr<TcpStoreServer> start(const TcpStoreServerOptions& options);
  /// Stops the server (see stop()).
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// The port the server listens on (the chosen one when the options asked for port 0).
  int port() const;
  /// The address the server is bound to, as given in the options.
  const std::string& host() const;
  /// Wakes the event loop, closes every connection and joins the thread. Clients see their
  /// connection close (DistributedError). Idempotent; must not be called from the loop itself.
  void stop();
  /// True until stop() has been called or the loop failed.
  bool running() const;

 private:
  class Impl;
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Settings of TcpStore::create().
struct TcpStoreOptions {
  /// Host of the server to connect to (a name or an address).
  std::string host = "127.0.0.1";
  /// Port of the server; with is_server, 0 picks a free one (see TcpStore::port()).
  int port = 0;
  /// Start a TcpStoreServer in this process (world rank 0) and connect to it.
  bool is_server = false;
  /// With is_server: the address the server binds. Empty = `host` itself when it is a
  /// loopback name or address (127.x, localhost, ::1), else "0.0.0.0" (every interface).
  std::string bind_address;
  /// Default deadline of get() and wait().
  std::chrono::milliseconds timeout = default_timeout();
  /// How long to keep retrying the connection while the server is not up yet.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(60);
  /// The shared secret presented to the server (and, with is_server, required by it); empty:
  /// none. rendezvous() sets it (GROUPCOORD_STORE_TOKEN, or a generated one on a single node).
  std::string token;
};

/// Store client of a TcpStoreServer. One connection per object; requests from several threads
/// are serialized on it. Every read and write is bounded by the request's deadline, so a dead
/// server yields DistributedError (or TimeoutError), never a hang. After such a failure the
/// connection is considered broken and every later call throws DistributedError.
class TcpStore : public Store {
 public:
  /// Default connect_timeout: how long to wait for a server that is not up yet.
  static constexpr std::chrono::milliseconds kDefaultConnectTimeout{std::chrono::seconds(60)};

  /// Connects to host:port, retrying with backoff until `connect_timeout` passes; then throws
  /// TimeoutError naming host:port. Throws std::invalid_argument for an empty host or a port
  /// outside 1..65535 or a token over 1024 bytes, DistributedError when the server refuses the
  /// handshake (a wrong or missing `token`, too many connections from this host).
  TcpStore(std::string host, int port, std::chrono::milliseconds timeout = default_timeout(),
           std::chrono::milliseconds connect_timeout = kDefaultConnectTimeout,
           std::string token = std::string());
  /// Closes the connection (and stops the server, when create() started one here and no
  /// other reference keeps this store alive).
  ~TcpStore() override;

  /// Connects per `options`; with `options.is_server` it first starts a TcpStoreServer in this
  /// process, which the returned store keeps alive.
  static std::shared_ptr<TcpStore> create(const TcpStoreOptions& options);

  using Store::wait;
  /// Sets `key` to `value` and wakes its waiters.
  void set(const std::string& key, const Bytes& value) override;
  /// The value of `key`, waiting up to timeout() (server side); TimeoutError names the key.
  Bytes get(const std::string& key) override;
  /// Atomically adds `delta` to the decimal counter at `key` and returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  /// Atomic compare-and-set with c10d semantics (see Store::compare_set).
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  /// True when every key exists now.
  bool check(const std::vector<std::string>& keys) override;
  /// Waits (server side) until every key exists; TimeoutError names the missing keys.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  /// Deletes `key`; returns whether it existed.
  bool delete_key(const std::string& key) override;
  /// Number of keys in the server.
  std::int64_t num_keys() override;

  /// The server host this client connected to.
  const std::string& host() const;
  /// The server port this client connected to (the actual one, also for port 0 + is_server).
  int port() const;
  /// The server create() started in this process, or nullptr.
  TcpStoreServer* server() const;

 private:
  class Connection;

  std::unique_ptr<TcpStoreServer> server_;  // declared first: destroyed after the connection
  std::unique_ptr<Connection> connection_;
};

}  // namespace groupcoord
