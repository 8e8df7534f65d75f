// Parses `distributed_init_method` strings: "env://", "tcp://host:port", "file:///path".
#pragma once

#include <string>

namespace groupcoord {

/// A parsed distributed_init_method.
struct InitMethod {
  enum class Kind { Env, Tcp, File };
  Kind kind = Kind::Env;
  std::string host;  ///< Tcp: host name or address ("[::1]" brackets removed)
  int port = -1;     ///< Tcp: port
  std::string path;  ///< File: absolute path of the store directory

  /// Parses `text`; throws std::invalid_argument for anything else (naming the text).
  static InitMethod parse(const std::string& text);
  /// Back to the URL form.
  std::string str() const;
};

}  // namespace groupcoord
