// Name resolution with a deadline. getaddrinfo(3) has no timeout of its own and can block for
// many seconds on a misconfigured resolver; the store client must not (every blocking call has a
// deadline). Numeric addresses are resolved inline; names are resolved on a helper thread that the
// caller waits for until the deadline, and that finishes (and frees its result) on its own when
// the caller gave up.
#pragma once

#include <netdb.h>

#include <memory>
#include <string>

#include "store/socket.h"

namespace groupcoord {
namespace store_internal {

/// getaddrinfo results, freed on scope exit.
using AddrInfoPtr = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

/// Resolves host:port for a stream socket (`passive`: for bind) before `deadline`. Returns
/// nullptr and fills `*error` ("cannot resolve host: ...", or "resolving host took longer than
/// the deadline") on failure; never throws for resolution errors.
AddrInfoPtr resolve_before(const std::string& host, int port, bool passive, TimePoint deadline,
                           std::string* error);

}  // namespace store_internal
}  // namespace groupcoord
