#include "groupcoord/rendezvous.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/env_parse.h"
#include "bootstrap/job_key.h"
#include "core/shared_memory.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/file_store.h"
#include "groupcoord/init_method.h"
#include "groupcoord/logging.h"
#include "groupcoord/prefix_store.h"
#include "groupcoord/tcp_store.h"
#include "groupcoord/torch_tcp_store.h"

namespace groupcoord {

namespace {

constexpr const char* kAddressKey = "groupcoord/rendezvous/tcp_store_address";
constexpr const char* kTokenKey = "groupcoord/rendezvous/tcp_store_token";
/// The launcher's shared secret for the TCP store (every rank must see the same value).
constexpr const char* kTokenEnv = "GROUPCOORD_STORE_TOKEN";
constexpr const char* kTorchStoreEnv = "GROUPCOORD_TORCH_STORE";
constexpr const char* kTorchStoreProtocolEnv = "GROUPCOORD_TORCH_STORE_PROTOCOL";
constexpr const char* kJoinedPrefix = "groupcoord/rendezvous/joined/";

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Rank, world size and local rank: explicit arguments win over the launcher's variables.
void resolve_identity(const RendezvousOptions& options, const LauncherEnv& launcher,
                      RendezvousResult& out) {
  out.rank = options.rank >= 0 ? options.rank : launcher.rank;
  out.world_size = options.world_size > 0 ? options.world_size : launcher.world_size;
  if (!launcher.detected() && options.rank < 0 && options.world_size <= 0) {
    // A plain `./engine` with no launcher and no arguments: a world of one, as a single process is.
    out.rank = 0;
    out.world_size = 1;
  }
  GC_CHECK(out.world_size > 0,
           "rendezvous: world_size is unknown: pass world_size or start under "
           "torchrun, mpirun, mpiexec or srun (launcher detected: ",
           launcher.launcher, ")");
  GC_CHECK(out.rank >= 0, "rendezvous: rank is unknown: pass rank or start under a launcher");
  GC_CHECK(out.rank < out.world_size, "rendezvous: rank ", out.rank,
           " is out of range for world_size ", out.world_size);
  GC_CHECK(options.world_size <= 0 || launcher.world_size <= 0 ||
               options.world_size == launcher.world_size,
           "rendezvous: world_size ", options.world_size, " disagrees with the launcher's ",
           launcher.world_size, " (", launcher.launcher, ")");
  out.launcher = launcher.launcher;
  out.local_world_size = launcher.local_world_size;
  out.local_rank = options.local_rank >= 0 ? options.local_rank : launcher.local_rank;
}

// GROUPCOORD_STORE_TOKEN, or empty.
std::string token_from(const EnvLookup& env) {
  std::optional<std::string> token = env(kTokenEnv);
  return token ? *token : std::string();
}

// A fresh secret for a store that only this job's ranks can learn about (128 random bits).
std::string generated_token() {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx",
                static_cast<unsigned long long>(shm::random_token()),
                static_cast<unsigned long long>(shm::random_token()));
  return text;
}

// The single-node rendezvous directory's parent must be this user's alone: it carries the store's
// token, and another user who made it first could read that or plant an address. Made 0700 when
// missing, tightened when it is ours, refused when it is not.
void make_private_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    GC_THROW(DistributedError, "single-node rendezvous: cannot create ", dir, ": ",
             std::strerror(errno));
  }
  struct stat info {};
  GC_CHECK(::lstat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode),
           "single-node rendezvous: ", dir,
           " is not a directory; remove it or set GROUPCOORD_RENDEZVOUS_DIR");
  GC_CHECK(info.st_uid == ::getuid(), "single-node rendezvous: ", dir,
           " belongs to another user (uid ", info.st_uid,
           "); remove it or set "
           "GROUPCOORD_RENDEZVOUS_DIR to a directory of your own");
  if ((info.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) {
    GC_THROW(DistributedError, "single-node rendezvous: cannot make ", dir,
             " private: ", std::strerror(errno));
  }
}

// Rank 0 hosts the server; everybody (rank 0 too) talks to it through a client that presents
// `token` (the server requires it when it is not empty). `connect_limit`: how long to keep
// trying to reach the server (the rendezvous's time left); `timeout`: the store's own deadline.
std::shared_ptr<Store> connect_tcp_store(const std::string& host, int port, int rank,
                                         std::chrono::milliseconds timeout,
                                         const std::string& token,
                                         std::chrono::milliseconds connect_limit) {
  TcpStoreOptions options;
  options.host = host;
  options.port = port;
  options.is_server = rank == 0;
  options.timeout = timeout;
  options.connect_timeout = connect_limit;
  options.token = token;
  if (options.is_server) {
    // A loopback master only needs a loopback listener; anything else must be reachable by peers.
    options.bind_address = is_loopback(host) ? "127.0.0.1" : "0.0.0.0";
  }
  return TcpStore::create(options);
}

// How often a rank 0 still waiting for peers says who is missing.
constexpr std::chrono::seconds kProgressEvery{10};

// "[1, 3]": the ranks whose "joined" key is not in the store yet.
std::string missing_ranks(Store& store, int world_size) {
  std::string list;
  for (int r = 0; r < world_size; ++r) {
    if (store.check({kJoinedPrefix + std::to_string(r)})) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  return "[" + list + "]";
}

// Rank 0 waits for every rank's "joined" key so it knows all clients reached the store. While it
// waits it says every kProgressEvery which ranks are missing, and a timeout names them (not the
// store keys). `where` names the store for the user ("127.0.0.1:29600", a directory).
void wait_for_all_ranks(Store& store, int rank, int world_size, std::chrono::milliseconds timeout,
                        const std::string& where) {
  store.set(kJoinedPrefix + std::to_string(rank), "1");
  if (rank != 0) return;
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(kJoinedPrefix + std::to_string(r));
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    const auto slice = std::min<std::chrono::milliseconds>(kProgressEvery, timeout - waited);
    try {
      store.wait(keys, std::max(slice, std::chrono::milliseconds(0)));
      return;
    } catch (const TimeoutError&) {
      const auto now = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::steady_clock::now() - start);
      const std::string missing = missing_ranks(store, world_size);
      if (now >= timeout) {
        GC_THROW(TimeoutError, "rendezvous: rank(s) ", missing, " of ", world_size,
                 " never joined at ", where, " within ", timeout.count(),
                 " ms (were they started, with the same MASTER_ADDR / MASTER_PORT or init "
                 "method, and the same world size?)");
      }
      GC_LOG(Warn, "rendezvous: waiting for rank(s) ", missing, " of ", world_size, " at ", where,
             ", ", now.count(), " s of ",
             std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), " s");
    }
  }
}

// How many single-node rendezvous this rank of this job has started in this process. Every rank
// performs the same sequence of rendezvous (it is collective), so the count agrees across ranks and
// names a fresh directory each time: a second world never reads the first one's address. Keyed by
// rank too, so ranks running as threads of one process count independently.
int next_rendezvous_generation(const std::string& job_key, int rank) {
  static std::mutex mutex;
  static std::map<std::string, int> generations;
  std::lock_guard<std::mutex> lock(mutex);
  return generations[job_key + "#" + std::to_string(rank)]++;
}

std::shared_ptr<Store> meet_in_directory(const std::string& dir, const EnvLookup& env,
                                         RendezvousResult& out, std::chrono::milliseconds timeout);

// See rendezvous.h: a FileStore directory only this launch can name publishes the address of an
// ephemeral-port TcpStore hosted by rank 0.
std::shared_ptr<Store> single_node_rendezvous(const LauncherEnv& launcher, const EnvLookup& env,
                                              RendezvousResult& out,
                                              std::chrono::milliseconds timeout) {
  const std::string job_key = bootstrap_detail::single_node_job_key(launcher);
  const std::string base = bootstrap_detail::rendezvous_base_dir(env);
  make_private_directory(base);
  std::string dir =
      base + "/" + job_key + "-" + std::to_string(next_rendezvous_generation(job_key, out.rank));
  try {
    return meet_in_directory(dir, env, out, timeout);
  } catch (...) {
    // A rank that cannot meet its peers here removes the directory: the job is failing, and a
    // dead rank 0 (the only one that removes it otherwise) must not leave its address behind.
    // Ranks that connected before no longer need it.
    FileStore::remove_directory(dir);
    throw;
  }
}

// single_node_rendezvous's meeting in `dir`: rank 0 publishes its store's token and address, the
// others read them and connect; every rank then joins.
std::shared_ptr<Store> meet_in_directory(const std::string& dir, const EnvLookup& env,
                                         RendezvousResult& out, std::chrono::milliseconds timeout) {
  // One deadline for reading the address and reaching the server: a rank that starts after rank
  // 0 died must not wait a timeout for each.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  FileStore files(dir, timeout);
  std::shared_ptr<Store> store;
  if (out.rank == 0) {
    // The launcher's token when it gave one, else a new one that only this user can read.
    std::string token = token_from(env);
    if (token.empty()) token = generated_token();
    auto tcp = std::dynamic_pointer_cast<TcpStore>(
        connect_tcp_store("127.0.0.1", 0, 0, timeout, token, timeout));
    GC_ASSERT(tcp != nullptr, "single-node rendezvous: expected a TcpStore");
    files.set(kTokenKey, token);  // before the address: a rank that sees the address has both
    files.set(kAddressKey, "127.0.0.1:" + std::to_string(tcp->port()));
    store = tcp;
  } else {
    Bytes address;
    try {
      address = files.get(kAddressKey);
    } catch (const TimeoutError& e) {
      GC_THROW(TimeoutError, "single-node rendezvous: rank 0 did not publish its store address in ",
               dir, " within ", timeout.count(), " ms. All ranks must be started by the same ",
               "launcher process on one node; otherwise set MASTER_ADDR and MASTER_PORT. (",
               e.what(), ")");
    }
    std::size_t colon = address.rfind(':');
    GC_ASSERT(colon != std::string::npos, "single-node rendezvous: bad address '", address, "'");
    int port = std::stoi(address.substr(colon + 1));
    const std::string token = files.get(kTokenKey);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    store = connect_tcp_store(address.substr(0, colon), port, out.rank, timeout, token,
                              std::max(left, std::chrono::milliseconds(1)));
  }
  wait_for_all_ranks(*store, out.rank, out.world_size, timeout, "the single-node store of " + dir);
  if (out.rank == 0) FileStore::remove_directory(dir);
  out.description = "single-node rendezvous via " + dir;
  return store;
}

// Rank 0 could not host the store at host:port. When a torch TCPStore answers there (one that
// torch.distributed of this job created, or torchrun's agent's without
// TORCHELASTIC_USE_AGENT_STORE), says how to join it rather than leaving the bind error alone.
void throw_if_torch_store_serves(const std::string& host, int port, const DistributedError& cause) {
  TorchTcpStoreOptions options;
  options.host = host;
  options.port = port;
  options.timeout = std::chrono::seconds(2);
  options.connect_timeout = std::chrono::seconds(1);
  std::shared_ptr<TorchTcpStore> torch_store;
  try {
    torch_store = TorchTcpStore::connect(options);
  } catch (const std::exception&) {
    return;  // not a torch store: the bind error stands
  }
  GC_THROW(DistributedError, "rendezvous: rank 0 cannot host the store at ", host, ":", port, " (",
           cause.what(), "): a torch TCPStore (", to_string(torch_store->protocol()),
           ") already serves that address; to join it, set ", kTorchStoreEnv,
           "=1 on every rank (torchrun's own store is joined by itself)");
}

// `token`: GROUPCOORD_STORE_TOKEN (every rank must have the same), or empty for a store that
// serves any client (then it should listen on loopback or a trusted network only).
std::shared_ptr<Store> tcp_rendezvous(const std::string& host, int port, RendezvousResult& out,
                                      std::chrono::milliseconds timeout, const std::string& token) {
  if (token.empty() && out.rank == 0 && !is_loopback(host)) {
    GC_LOG(Info, "rendezvous: the store at ", host, ":", port, " accepts any client; set ",
           kTokenEnv, " to the same secret on every rank to require it");
  }
  std::shared_ptr<Store> store;
  try {
    store = connect_tcp_store(host, port, out.rank, timeout, token, timeout);
  } catch (const DistributedError& e) {
    if (out.rank == 0 && port > 0) throw_if_torch_store_serves(host, port, e);
    throw;
  }
  wait_for_all_ranks(*store, out.rank, out.world_size, timeout, host + ":" + std::to_string(port));
  out.description = "tcp store at " + host + ":" + std::to_string(port);
  return store;
}

// Whether MASTER_ADDR:MASTER_PORT is a torch TCPStore to join as a client: torchrun's agent says
// so with TORCHELASTIC_USE_AGENT_STORE=True (it hosts the store; no worker may bind that port);
// GROUPCOORD_TORCH_STORE=1 says so for a store torch.distributed created (=0 never joins one).
bool use_torch_store(const EnvLookup& env) {
  const std::string forced = bootstrap_detail::env_str(env, kTorchStoreEnv);
  if (!forced.empty()) {
    GC_CHECK(forced == "0" || forced == "1", kTorchStoreEnv, "='", forced,
             "': use 1 (join the torch TCPStore at MASTER_ADDR:MASTER_PORT) or 0 (never)");
    return forced == "1";
  }
  return bootstrap_detail::env_str(env, "TORCHELASTIC_USE_AGENT_STORE") == "True";
}

// Every rank, rank 0 too, is a client of the torch TCPStore at host:port. The store outlives this
// job's attempts (torchrun restarts workers against the same agent store) and may serve torch's
// own keys, so this world's keys live under "groupcoord/<run id>/attempt_<restart>/world_<n>":
// a restarted attempt, or a second world of this process, never sees an older one's keys.
std::shared_ptr<Store> torch_store_rendezvous(const LauncherEnv& launcher, const EnvLookup& env,
                                              RendezvousResult& out,
                                              std::chrono::milliseconds timeout) {
  TorchTcpStoreOptions options;
  options.host = launcher.master_addr;
  options.port = launcher.master_port;
  options.timeout = timeout;
  options.connect_timeout = timeout;
  options.protocol = parse_torch_store_protocol(
      bootstrap_detail::env_str(env, kTorchStoreProtocolEnv), kTorchStoreProtocolEnv);
  auto torch_store = TorchTcpStore::connect(options);
  const std::string run_id = launcher.job_id.empty() ? "none" : launcher.job_id;
  const std::string attempt =
      std::to_string(bootstrap_detail::env_int(env, "TORCHELASTIC_RESTART_COUNT").value_or(0));
  const std::string scope = "groupcoord/" + run_id + "/attempt_" + attempt;
  const int world = next_rendezvous_generation("torch-store/" + scope, out.rank);
  auto store =
      std::make_shared<PrefixStore>(scope + "/world_" + std::to_string(world), torch_store);
  const std::string where = "the torch TCPStore at " + torch_store->endpoint() + " (" +
                            to_string(torch_store->protocol()) + ")";
  wait_for_all_ranks(*store, out.rank, out.world_size, timeout, where);
  out.description = where;
  return store;
}

std::shared_ptr<Store> env_rendezvous(const LauncherEnv& launcher, const EnvLookup& env,
                                      RendezvousResult& out, std::chrono::milliseconds timeout) {
  if (!launcher.master_addr.empty() && launcher.master_port > 0) {
    if (use_torch_store(env)) return torch_store_rendezvous(launcher, env, out, timeout);
    out.store_host_rank = 0;
    return tcp_rendezvous(launcher.master_addr, launcher.master_port, out, timeout,
                          token_from(env));
  }
  if (out.world_size == 1) {
    // Nobody to meet: an in-process server keeps the code path identical to real jobs; its
    // secret never leaves the process.
    out.store_host_rank = 0;
    return tcp_rendezvous("127.0.0.1", 0, out, timeout, generated_token());
  }
  GC_CHECK(launcher.detected(),
           "env:// rendezvous needs MASTER_ADDR and MASTER_PORT, or a "
           "launcher (torchrun, mpirun, mpiexec, srun)");
  GC_CHECK(
      launcher.single_node(), "env:// rendezvous: ", launcher.launcher, " reports ",
      launcher.world_size, " ranks with ", launcher.local_world_size,
      " on this node; a multi-node job needs MASTER_ADDR and MASTER_PORT (or tcp://host:port)");
  out.store_host_rank = 0;  // rank 0 serves the single-node store
  return single_node_rendezvous(launcher, env, out, timeout);
}

}  // namespace

RendezvousResult rendezvous(const RendezvousOptions& options, const EnvLookup& env) {
  InitMethod method = InitMethod::parse(options.init_method);
  LauncherEnv launcher = detect_launcher(env);
  RendezvousResult out;
  resolve_identity(options, launcher, out);

  switch (method.kind) {
    case InitMethod::Kind::Env:
      out.store = env_rendezvous(launcher, env, out, options.timeout);
      out.single_node = launcher.single_node() || out.world_size == 1 ||
                        (!launcher.master_addr.empty() && is_loopback(launcher.master_addr));
      break;
    case InitMethod::Kind::Tcp:
      out.store_host_rank = 0;
      out.store = tcp_rendezvous(method.host, method.port, out, options.timeout, token_from(env));
      out.single_node = launcher.single_node() || is_loopback(method.host);
      break;
    case InitMethod::Kind::File:
      out.store = std::make_shared<FileStore>(method.path, options.timeout);
      wait_for_all_ranks(*out.store, out.rank, out.world_size, options.timeout,
                         "the file store " + method.path);
      out.single_node = launcher.single_node() || out.world_size == 1;
      out.description = "file store at " + method.path;
      break;
  }
  if (out.local_rank < 0) {
    // Without launcher information the only safe guess is the world rank on a single node.
    out.local_rank = out.single_node ? out.rank : 0;
  }
  if (out.local_world_size < 0 && out.single_node) out.local_world_size = out.world_size;
  set_log_rank(out.rank);
  GC_LOG(Info, "rendezvous: rank ", out.rank, "/", out.world_size, " local_rank ", out.local_rank,
         " launcher ", out.launcher, ", ", out.description);
  return out;
}

}  // namespace groupcoord
