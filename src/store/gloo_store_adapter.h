// Presents a groupcoord Store as a gloo::rendezvous::Store, so that Gloo contexts rendezvous
// through our TcpStore/FileStore/PrefixStore (private to the library).
#pragma once

#include <memory>

#include <gloo/rendezvous/store.h>

#include "groupcoord/store.h"

namespace groupcoord {

/// A gloo::rendezvous::Store forwarding to `store`: set/get/wait map one to one (Gloo's
/// std::vector<char> values become Bytes), wait() without a timeout uses store->timeout().
/// groupcoord exceptions (TimeoutError, DistributedError) propagate unchanged through Gloo.
/// Throws std::invalid_argument for a null store.
std::shared_ptr<gloo::rendezvous::Store> make_gloo_store(std::shared_ptr<Store> store);

}  // namespace groupcoord
