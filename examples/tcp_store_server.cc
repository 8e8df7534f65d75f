// groupcoord-store-server: a standalone TcpStoreServer for jobs whose store lives outside the
// ranks (every rank then connects as a client, e.g. tcp://host:port with no rank hosting it).
//
//   groupcoord-store-server --host 0.0.0.0 --port 29500
//
// Prints the port it listens on (alone, on stdout; useful with --port 0) and serves until
// SIGINT or SIGTERM. With GROUPCOORD_STORE_TOKEN set it serves only clients that present that
// token (rendezvous() passes the same variable on every rank).
#include <signal.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "groupcoord/tcp_store.h"

namespace {

void print_usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--host H] [--port P] [--max-key-bytes N] [--max-value-bytes N]\n"
               "          [--max-keys-per-request N]\n"
               "  --host H   address to bind (default 127.0.0.1; 0.0.0.0 for every interface)\n"
               "  --port P   port to listen on (default 0: pick a free one)\n"
               "Prints the port on stdout, then serves until SIGINT or SIGTERM.\n",
               program);
}

/// Parses a non-negative integer no larger than `max`; false on anything else.
bool parse_number(const char* text, long long max, long long* value) {
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || parsed < 0 || parsed > max) return false;
  *value = parsed;
  return true;
}

/// Fills `options` from the command line; false (after printing why) on a bad argument.
bool parse_args(int argc, char** argv, groupcoord::TcpStoreServerOptions* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return false;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", argv[0], flag.c_str());
      return false;
    }
    const char* value = argv[++i];
    long long number = 0;
    bool ok = true;
    if (flag == "--host") {
      options->host = value;
    } else if (flag == "--port") {
      ok = parse_number(value, 65535, &number);
      options->port = static_cast<int>(number);
    } else if (flag == "--max-key-bytes") {
      ok = parse_number(value, LLONG_MAX, &number);
      options->max_key_bytes = static_cast<std::size_t>(number);
    } else if (flag == "--max-value-bytes") {
      ok = parse_number(value, LLONG_MAX, &number);
      options->max_value_bytes = static_cast<std::size_t>(number);
    } else if (flag == "--max-keys-per-request") {
      ok = parse_number(value, LLONG_MAX, &number);
      options->max_keys_per_request = static_cast<std::size_t>(number);
    } else {
      std::fprintf(stderr, "%s: unknown option %s\n", argv[0], flag.c_str());
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "%s: bad value '%s' for %s\n", argv[0], value, flag.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  groupcoord::TcpStoreServerOptions options;
  if (!parse_args(argc, argv, &options)) {
    print_usage(argv[0]);
    return 2;
  }
  if (const char* token = std::getenv("GROUPCOORD_STORE_TOKEN")) options.token = token;
  // Block the stop signals before the server thread starts, so it inherits the mask and only
  // sigwait() below ever sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  try {
    auto server = groupcoord::TcpStoreServer::start(options);
    std::printf("%d\n", server->port());
    std::fflush(stdout);
    std::fprintf(stderr, "groupcoord-store-server: listening on %s port %d\n",
                 server->host().c_str(), server->port());
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    std::fprintf(stderr, "groupcoord-store-server: %s, stopping\n", strsignal(signal_number));
    server->stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "groupcoord-store-server: %s\n", e.what());
    return 1;
  }
  return 0;
}
