#include "groupcoord/init_method.h"

#include "bootstrap/env_parse.h"
#include "groupcoord/check.h"

namespace groupcoord {

namespace {

constexpr const char* kEnvPrefix = "env://";
constexpr const char* kTcpPrefix = "tcp://";
constexpr const char* kFilePrefix = "file://";

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

// "host:port", "[v6]:port". The port is required: there is no agreed default.
void parse_host_port(const std::string& text, const std::string& rest, InitMethod& out) {
  std::size_t colon = rest.rfind(':');
  GC_CHECK(colon != std::string::npos && colon + 1 < rest.size(), "distributed_init_method '", text,
           "' needs a port: tcp://host:port");
  std::string host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  GC_CHECK(!host.empty(), "distributed_init_method '", text, "' has an empty host");
  int port =
      bootstrap_detail::parse_non_negative_int(rest.substr(colon + 1), "port of '" + text + "'");
  GC_CHECK(port > 0 && port < 65536, "distributed_init_method '", text, "': port ", port,
           " is out of range 1..65535");
  out.host = host;
  out.port = port;
}

}  // namespace

InitMethod InitMethod::parse(const std::string& text) {
  InitMethod out;
  if (text.empty() || text == kEnvPrefix) {
    out.kind = Kind::Env;
  } else if (starts_with(text, kTcpPrefix)) {
    out.kind = Kind::Tcp;
    parse_host_port(text, text.substr(6), out);
  } else if (starts_with(text, kFilePrefix)) {
    out.kind = Kind::File;
    out.path = text.substr(7);
    GC_CHECK(!out.path.empty() && out.path.front() == '/', "distributed_init_method '", text,
             "' must name an absolute path: file:///path");
  } else {
    GC_CHECK(false, "unsupported distributed_init_method '", text,
             "': expected env://, tcp://host:port or file:///path");
  }
  return out;
}

std::string InitMethod::str() const {
  switch (kind) {
    case Kind::Env:
      return kEnvPrefix;
    case Kind::Tcp: {
      bool v6 = host.find(':') != std::string::npos;
      return std::string(kTcpPrefix) + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
    }
    case Kind::File:
      return std::string(kFilePrefix) + path;
  }
  return "";
}

}  // namespace groupcoord
