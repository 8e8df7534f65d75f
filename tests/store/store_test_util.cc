// Helpers for the store tests (see store_test_util.h).
#include "store_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace groupcoord {
namespace store_test {
namespace {

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

std::uint32_t get_le32(const std::string& bytes, std::size_t pos) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[pos + i])) << (8 * i);
  }
  return value;
}

/// Moves complete frames from the front of `buffer` into `replies`.
void split_frames(std::string* buffer, std::vector<RawReply>* replies) {
  while (buffer->size() >= 4) {
    const std::uint32_t length = get_le32(*buffer, 0);
    if (length == 0 || buffer->size() < 4 + std::size_t{length}) return;
    RawReply reply;
    reply.status = static_cast<std::uint8_t>((*buffer)[4]);
    reply.body = buffer->substr(5, length - 1);
    replies->push_back(std::move(reply));
    buffer->erase(0, 4 + std::size_t{length});
  }
}

}  // namespace

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback(0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    throw std::runtime_error("free_port: bind failed");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string le32(std::uint32_t value) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

std::string le64(std::int64_t value) {
  std::string out;
  const auto bits = static_cast<std::uint64_t>(value);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  return out;
}

std::string field(const std::string& bytes) {
  return le32(static_cast<std::uint32_t>(bytes.size())) + bytes;
}

std::string frame(const std::string& payload) {
  return le32(static_cast<std::uint32_t>(payload.size())) + payload;
}

std::string hello(std::uint32_t magic, std::uint32_t version, const std::string& token) {
  return le32(magic) + le32(version) + le32(static_cast<std::uint32_t>(token.size())) + token;
}

std::string RawReply::message() const {
  if (body.size() < 4) return std::string();
  return body.substr(4, get_le32(body, 0));
}

RawClient::RawClient(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(port);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd_);
    throw std::runtime_error("RawClient: connect failed");
  }
}

RawClient::~RawClient() { ::close(fd_); }

bool RawClient::send(const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

void RawClient::shutdown_write() { ::shutdown(fd_, SHUT_WR); }

bool RawClient::read_reply(RawReply* reply, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<RawReply> replies;
  for (;;) {
    split_frames(&pending_, &replies);
    if (!replies.empty()) {
      *reply = replies.front();
      // Put back any further frames for the next call.
      std::string rest;
      for (std::size_t i = 1; i < replies.size(); ++i) {
        rest += le32(static_cast<std::uint32_t>(replies[i].body.size() + 1)) +
                static_cast<char>(replies[i].status) + replies[i].body;
      }
      pending_ = rest + pending_;
      return true;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[65536];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) return false;
    pending_.append(buffer, static_cast<std::size_t>(n));
  }
}

RawOutcome RawClient::read_until_closed(int timeout_ms) {
  RawOutcome outcome;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string buffer = pending_;
  pending_.clear();
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      outcome.timed_out = true;
      break;
    }
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // EOF, or ECONNRESET: both mean the server dropped us
      outcome.closed = true;
      break;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  split_frames(&buffer, &outcome.replies);
  outcome.trailing = buffer;
  return outcome;
}

}  // namespace store_test
}  // namespace groupcoord
