#include "shm/remote_inbox.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"

namespace groupcoord {
namespace shm {

namespace {

// A message longer than this is a corrupt length, not a message (the ring allows any size, but
// nothing real comes near it).
constexpr std::uint64_t kMaxMessageBytes = std::uint64_t{1} << 40;

}  // namespace

RemoteInbox::RemoteInbox(std::string label, std::string writer, const RemoteEndpoint& endpoint,
                         int rank, const Deadline& deadline, std::string* error)
    : label_(std::move(label)), writer_(std::move(writer)) {
  const auto until = store_internal::deadline_after(deadline.remaining());
  std::string why = "no attempt made";
  while (!fd_.valid() && store_internal::Clock::now() < until) {
    fd_ = store_internal::try_connect_tcp(endpoint.host, endpoint.port, until, &why);
    if (!fd_.valid()) ::poll(nullptr, 0, 20);  // the writer listens already; a short retry
  }
  if (!fd_.valid()) {
    *error = label_ + ": cannot reach the writer (" + writer_ + ") at " + endpoint.host + ":" +
             std::to_string(endpoint.port) + ": " + why;
    return;
  }
  store_internal::set_nonblocking(fd_.get());
  store_internal::set_nodelay(fd_.get());
  RemoteHello hello;
  hello.token = endpoint.token;
  hello.rank = rank;
  int err = 0;
  if (store_internal::send_all(fd_.get(), reinterpret_cast<const char*>(&hello), sizeof hello,
                               until, &err) != store_internal::IoStatus::kOk) {
    *error = label_ + ": cannot introduce this reader to the writer (" + writer_ + ")";
    fd_.reset();
  } else if (endpoint.stream_version != kRemoteStreamVersion) {
    // Checked after the hello, which carries this reader's version: the writer then ends its
    // wait for the readers at once too, instead of at the group's timeout.
    *error = label_ + ": the writer (" + writer_ + ") frames messages as stream " +
             stream_version_text(endpoint.stream_version) + ", this reader as " +
             stream_version_text(kRemoteStreamVersion) +
             ": the ranks run different groupcoord builds";
    fd_.reset();
  }
}

bool RemoteInbox::fill(char* data, std::size_t size, std::size_t* have, const Deadline& deadline) {
  while (*have < size) {
    const ssize_t n = ::recv(fd_.get(), data + *have, size - *have, 0);
    if (n > 0) {
      *have += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      GC_THROW(DistributedError, label_, ": dequeue: the writer (", writer_,
               ") closed the queue or died; no message is left to read");
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      GC_THROW(DistributedError, label_, ": dequeue: the connection to the writer (", writer_,
               ") failed: ", store_internal::errno_text(errno));
    }
    const auto left = deadline.remaining();
    if (left.count() <= 0) return false;
    pollfd wait{fd_.get(), POLLIN, 0};
    ::poll(&wait, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
  }
  return true;
}

Bytes RemoteInbox::receive(const Deadline& deadline, bool* writer_failed) {
  auto timed_out = [&](const char* what) {
    GC_THROW(TimeoutError, label_, ": dequeue timed out after ", deadline.timeout().count(),
             " ms waiting for ", what, " from the writer (", writer_,
             "); dequeue again to resume, nothing is lost");
  };
  if (length_have_ < sizeof length_) {
    if (!fill(reinterpret_cast<char*>(&length_), sizeof length_, &length_have_, deadline)) {
      timed_out(length_have_ == 0 ? "a message" : "the rest of a message");
    }
    if (message_bytes(length_) > kMaxMessageBytes) {
      GC_THROW(DistributedError, label_, ": dequeue: corrupt message length ", length_,
               " from the writer (", writer_, ")");
    }
    message_.resize(static_cast<std::size_t>(message_bytes(length_)));
    message_have_ = 0;
  }
  if (!fill(message_.data(), message_.size(), &message_have_, deadline)) {
    timed_out("the rest of a message");
  }
  length_have_ = 0;
  *writer_failed = is_writer_failure(length_);
  return std::move(message_);
}

}  // namespace shm
}  // namespace groupcoord
