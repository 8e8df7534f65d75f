// Encoding and bounds-checked decoding of TCP store frames (see tcp_store_protocol.h).
#include "store/tcp_store_protocol.h"

#include <cstring>

namespace groupcoord {
namespace store_internal {
namespace {

/// Fixed overhead of a request besides keys and values: command, counts, timeout, slack.
constexpr std::uint64_t kRequestOverhead = 64;

void put_le(std::string* out, std::uint64_t value, int size) {
  for (int i = 0; i < size; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const char* data, int size) {
  std::uint64_t value = 0;
  for (int i = 0; i < size; ++i) {
    value |= static_cast<std::uint64_t>(static_cast<unsigned char>(data[i])) << (8 * i);
  }
  return value;
}

}  // namespace

const char* command_name(std::uint8_t command) {
  switch (static_cast<Command>(command)) {
    case Command::kSet:
      return "set";
    case Command::kGet:
      return "get";
    case Command::kAdd:
      return "add";
    case Command::kCompareSet:
      return "compare_set";
    case Command::kCheck:
      return "check";
    case Command::kWait:
      return "wait";
    case Command::kDeleteKey:
      return "delete_key";
    case Command::kNumKeys:
      return "num_keys";
  }
  return "unknown";
}

std::uint64_t ProtocolLimits::max_request_bytes() const {
  const std::uint64_t keys =
      std::uint64_t{max_keys_per_request} * (4 + std::uint64_t{max_key_bytes});
  const std::uint64_t values = 2 * (4 + std::uint64_t{max_value_bytes});
  return kRequestOverhead + keys + values;
}

std::uint64_t ProtocolLimits::max_reply_bytes() const {
  // The largest reply is either a value or the list of missing keys of a timed-out wait.
  const std::uint64_t keys =
      std::uint64_t{max_keys_per_request} * (4 + std::uint64_t{max_key_bytes});
  const std::uint64_t value = 4 + std::uint64_t{max_value_bytes};
  return kRequestOverhead + (keys > value ? keys : value) + kMaxHandshakeReplyBytes;
}

FrameWriter& FrameWriter::u8(std::uint8_t value) {
  buffer_.push_back(static_cast<char>(value));
  return *this;
}

FrameWriter& FrameWriter::u32(std::uint32_t value) {
  put_le(&buffer_, value, 4);
  return *this;
}

FrameWriter& FrameWriter::i64(std::int64_t value) {
  put_le(&buffer_, static_cast<std::uint64_t>(value), 8);
  return *this;
}

FrameWriter& FrameWriter::bytes(std::string_view value) {
  u32(static_cast<std::uint32_t>(value.size()));
  buffer_.append(value.data(), value.size());
  return *this;
}

std::string FrameWriter::finish() {
  const auto length = static_cast<std::uint32_t>(buffer_.size() - kFrameHeaderBytes);
  for (int i = 0; i < 4; ++i) buffer_[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return std::move(buffer_);
}

void FrameReader::need(std::size_t size, const char* what) const {
  if (data_.size() - pos_ < size) {
    throw ProtocolError(std::string("truncated message: ") + what + " needs " +
                        std::to_string(size) + " bytes, " + std::to_string(data_.size() - pos_) +
                        " left");
  }
}

std::uint8_t FrameReader::u8(const char* what) {
  need(1, what);
  return static_cast<std::uint8_t>(data_[pos_++]);
}

std::uint32_t FrameReader::u32(const char* what) {
  need(4, what);
  const auto value = static_cast<std::uint32_t>(get_le(data_.data() + pos_, 4));
  pos_ += 4;
  return value;
}

std::int64_t FrameReader::i64(const char* what) {
  need(8, what);
  const auto value = static_cast<std::int64_t>(get_le(data_.data() + pos_, 8));
  pos_ += 8;
  return value;
}

std::string FrameReader::bytes(const char* what, std::uint64_t max_size) {
  const std::uint32_t size = u32(what);
  if (size > max_size) {
    throw ProtocolError(std::string(what) + " of " + std::to_string(size) +
                        " bytes exceeds the limit of " + std::to_string(max_size));
  }
  need(size, what);
  std::string value(data_.substr(pos_, size));
  pos_ += size;
  return value;
}

void FrameReader::expect_end() const {
  if (pos_ != data_.size()) {
    throw ProtocolError(std::to_string(data_.size() - pos_) + " unexpected trailing bytes");
  }
}

std::string encode_handshake(std::string_view token) {
  if (token.size() > kMaxTokenBytes) {
    throw std::invalid_argument("TcpStore: a token of " + std::to_string(token.size()) +
                                " bytes is longer than the limit of " +
                                std::to_string(kMaxTokenBytes));
  }
  std::string out;
  put_le(&out, kProtocolMagic, 4);
  put_le(&out, kProtocolVersion, 4);
  put_le(&out, token.size(), 4);
  out.append(token);
  return out;
}

bool tokens_match(std::string_view presented, std::string_view expected) {
  if (presented.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    difference |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  }
  return difference == 0;
}

std::uint32_t decode_u32(const char* data) { return static_cast<std::uint32_t>(get_le(data, 4)); }

std::string encode_message_reply(Status status, std::string_view message) {
  return FrameWriter().u8(static_cast<std::uint8_t>(status)).bytes(message).finish();
}

std::string encode_timeout_reply(const std::vector<std::string>& missing_keys) {
  FrameWriter writer;
  writer.u8(static_cast<std::uint8_t>(Status::kTimeout))
      .u32(static_cast<std::uint32_t>(missing_keys.size()));
  for (const std::string& key : missing_keys) writer.bytes(key);
  return writer.finish();
}

}  // namespace store_internal
}  // namespace groupcoord
