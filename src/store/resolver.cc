#include "store/resolver.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace groupcoord {
namespace store_internal {

namespace {

// What the helper thread hands back; shared so that it outlives a caller that gave up.
struct Lookup {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  int rc = 0;
  addrinfo* result = nullptr;
  bool abandoned = false;  // the caller left: the thread frees the result
};

addrinfo hints_for(bool passive, bool numeric) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0) | (numeric ? AI_NUMERICHOST : 0);
  return hints;
}

AddrInfoPtr failed(std::string* error, const std::string& why) {
  *error = why;
  return AddrInfoPtr(nullptr, &freeaddrinfo);
}

}  // namespace

AddrInfoPtr resolve_before(const std::string& host, int port, bool passive, TimePoint deadline,
                           std::string* error) {
  const std::string service = std::to_string(port);
  const char* node = host.empty() ? nullptr : host.c_str();
  // A numeric address (or none, for passive) never touches the network: resolve it inline.
  addrinfo numeric = hints_for(passive, /*numeric=*/true);
  addrinfo* result = nullptr;
  int rc = getaddrinfo(node, service.c_str(), &numeric, &result);
  if (rc == 0) return AddrInfoPtr(result, &freeaddrinfo);
  if (rc != EAI_NONAME)
    return failed(error, std::string("cannot resolve host: ") + gai_strerror(rc));

  auto lookup = std::make_shared<Lookup>();
  std::thread([lookup, host, service, passive] {
    addrinfo hints = hints_for(passive, /*numeric=*/false);
    addrinfo* found = nullptr;
    const int code = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    std::lock_guard<std::mutex> lock(lookup->mutex);
    if (lookup->abandoned) {
      if (found != nullptr) freeaddrinfo(found);
      return;
    }
    lookup->rc = code;
    lookup->result = found;
    lookup->done = true;
    lookup->done_cv.notify_all();
  }).detach();

  std::unique_lock<std::mutex> lock(lookup->mutex);
  if (!lookup->done_cv.wait_until(lock, deadline, [&] { return lookup->done; })) {
    lookup->abandoned = true;
    return failed(error, "resolving '" + host + "' took longer than the deadline");
  }
  if (lookup->rc != 0) {
    return failed(error, std::string("cannot resolve host: ") + gai_strerror(lookup->rc));
  }
  return AddrInfoPtr(lookup->result, &freeaddrinfo);
}

}  // namespace store_internal
}  // namespace groupcoord
