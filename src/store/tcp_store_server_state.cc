// Key-value table and parked waits of the TCP store server (see tcp_store_server_state.h).
#include "store/tcp_store_server_state.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "store/store_semantics.h"

namespace groupcoord {
namespace store_internal {
namespace {

std::uint8_t status_byte(Status status) { return static_cast<std::uint8_t>(status); }

RequestResult reply(std::string frame) {
  RequestResult result;
  result.frame = std::move(frame);
  return result;
}

std::string ok_frame() { return FrameWriter().u8(status_byte(Status::kOk)).finish(); }

std::string bool_frame(bool value) {
  return FrameWriter().u8(status_byte(Status::kOk)).u8(value ? 1 : 0).finish();
}

std::string int_frame(std::int64_t value) {
  return FrameWriter().u8(status_byte(Status::kOk)).i64(value).finish();
}

std::string bytes_frame(const Bytes& value) {
  return FrameWriter().u8(status_byte(Status::kOk)).bytes(value).finish();
}

}  // namespace

RequestResult ServerState::handle(std::uint64_t connection, std::string_view payload,
                                  TimePoint now) {
  FrameReader reader(payload);
  std::uint8_t command = 0;
  try {
    command = reader.u8("command");
    return dispatch(connection, command, reader, now);
  } catch (const ProtocolError& e) {
    RequestResult result;
    result.kind = RequestResult::Kind::kProtocolError;
    result.frame = encode_message_reply(
        Status::kError, std::string("bad ") + command_name(command) + " request: " + e.what());
    return result;
  } catch (const std::invalid_argument& e) {
    // The request was well formed but the operation is refused; the connection stays usable.
    return reply(encode_message_reply(Status::kInvalidArgument, e.what()));
  }
}

RequestResult ServerState::dispatch(std::uint64_t connection, std::uint8_t command,
                                    FrameReader& reader, TimePoint now) {
  switch (static_cast<Command>(command)) {
    case Command::kSet:
      return do_set(reader);
    case Command::kGet:
      return do_get(connection, reader, now);
    case Command::kAdd:
      return do_add(reader);
    case Command::kCompareSet:
      return do_compare_set(reader);
    case Command::kCheck:
      return do_check(reader);
    case Command::kWait:
      return do_wait(connection, reader, now);
    case Command::kDeleteKey:
      return do_delete_key(reader);
    case Command::kNumKeys:
      return do_num_keys(reader);
  }
  throw ProtocolError("unknown command " + std::to_string(command));
}

// Each handler decodes the whole request (expect_end) before touching the table, so that a
// malformed request never half-applies.

RequestResult ServerState::do_set(FrameReader& reader) {
  std::string key = read_key(reader);
  Bytes value = reader.bytes("value", limits_.max_value_bytes);
  reader.expect_end();
  put(key, std::move(value));
  RequestResult result = reply(ok_frame());
  result.woken = wake(key);
  return result;
}

RequestResult ServerState::do_get(std::uint64_t connection, FrameReader& reader, TimePoint now) {
  std::string key = read_key(reader);
  const TimePoint deadline = read_deadline(reader, now);
  reader.expect_end();
  const auto it = values_.find(key);
  if (it != values_.end()) return reply(bytes_frame(it->second));
  return park(connection, Command::kGet, {std::move(key)}, deadline);
}

RequestResult ServerState::do_add(FrameReader& reader) {
  std::string key = read_key(reader);
  const std::int64_t delta = reader.i64("delta");
  reader.expect_end();
  const auto it = values_.find(key);
  const std::int64_t value =
      add_to_counter(key, it == values_.end() ? nullptr : &it->second, delta);
  put(key, counter_text(value));
  RequestResult result = reply(int_frame(value));
  result.woken = wake(key);
  return result;
}

RequestResult ServerState::do_compare_set(FrameReader& reader) {
  std::string key = read_key(reader);
  Bytes expected = reader.bytes("expected value", limits_.max_value_bytes);
  Bytes desired = reader.bytes("desired value", limits_.max_value_bytes);
  reader.expect_end();
  const auto it = values_.find(key);
  CompareSetOutcome outcome =
      decide_compare_set(it == values_.end() ? nullptr : &it->second, expected, desired);
  RequestResult result = reply(bytes_frame(outcome.result));
  if (outcome.store) {
    put(key, std::move(desired));
    result.woken = wake(key);
  }
  return result;
}

RequestResult ServerState::do_check(FrameReader& reader) {
  const std::vector<std::string> keys = read_keys(reader);
  reader.expect_end();
  return reply(bool_frame(missing(keys).empty()));
}

RequestResult ServerState::do_wait(std::uint64_t connection, FrameReader& reader, TimePoint now) {
  std::vector<std::string> keys = read_keys(reader);
  const TimePoint deadline = read_deadline(reader, now);
  reader.expect_end();
  if (missing(keys).empty()) return reply(ok_frame());
  return park(connection, Command::kWait, std::move(keys), deadline);
}

RequestResult ServerState::do_delete_key(FrameReader& reader) {
  const std::string key = read_key(reader);
  reader.expect_end();
  return reply(bool_frame(erase(key)));
}

void ServerState::put(const std::string& key, Bytes value) {
  const auto it = values_.find(key);
  const std::size_t old_bytes = it == values_.end() ? 0 : key.size() + it->second.size();
  const std::size_t new_bytes = key.size() + value.size();
  const std::size_t total = stored_bytes_ - old_bytes + new_bytes;
  if (max_total_bytes_ > 0 && new_bytes > old_bytes && total > max_total_bytes_) {
    throw std::invalid_argument(
        "the store is full: key '" + key.substr(0, 64) + "' (" + std::to_string(new_bytes) +
        " bytes with its value) would bring it to " + std::to_string(total) +
        " bytes, over its limit of " + std::to_string(max_total_bytes_) +
        " (TcpStoreServerOptions::max_total_bytes); delete keys no longer needed");
  }
  stored_bytes_ = total;
  if (it == values_.end()) {
    values_.emplace(key, std::move(value));
  } else {
    it->second = std::move(value);
  }
}

bool ServerState::erase(const std::string& key) {
  const auto it = values_.find(key);
  if (it == values_.end()) return false;
  stored_bytes_ -= key.size() + it->second.size();
  values_.erase(it);
  return true;
}

RequestResult ServerState::do_num_keys(FrameReader& reader) {
  reader.expect_end();
  return reply(int_frame(static_cast<std::int64_t>(values_.size())));
}

std::string ServerState::read_key(FrameReader& reader) {
  std::string key = reader.bytes("key", limits_.max_key_bytes);
  if (key.empty()) throw ProtocolError("empty key");
  return key;
}

std::vector<std::string> ServerState::read_keys(FrameReader& reader) {
  const std::uint32_t count = reader.u32("key count");
  if (count > limits_.max_keys_per_request) {
    throw ProtocolError(std::to_string(count) + " keys exceed the limit of " +
                        std::to_string(limits_.max_keys_per_request));
  }
  std::vector<std::string> keys;
  keys.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) keys.push_back(read_key(reader));
  return keys;
}

TimePoint ServerState::read_deadline(FrameReader& reader, TimePoint now) {
  const std::int64_t timeout_ms = reader.i64("timeout");
  if (timeout_ms < 0) throw ProtocolError("negative timeout " + std::to_string(timeout_ms));
  return now + std::chrono::milliseconds(std::min(timeout_ms, kMaxTimeoutMs));
}

RequestResult ServerState::park(std::uint64_t connection, Command command,
                                std::vector<std::string> keys, TimePoint deadline) {
  if (waiters_.count(connection) != 0) {
    throw ProtocolError("a request is already waiting on this connection");
  }
  Waiter waiter{command, std::move(keys), deadline};
  for (const std::string& key : waiter.keys) waiters_by_key_[key].push_back(connection);
  waiters_.emplace(connection, std::move(waiter));
  RequestResult result;
  result.kind = RequestResult::Kind::kParked;
  return result;
}

std::vector<Delivery> ServerState::wake(const std::string& key) {
  std::vector<Delivery> woken;
  const auto it = waiters_by_key_.find(key);
  if (it == waiters_by_key_.end()) return woken;
  const std::vector<std::uint64_t> candidates = it->second;  // unindex() edits the original
  for (const std::uint64_t connection : candidates) {
    const auto waiter = waiters_.find(connection);
    if (waiter == waiters_.end() || !missing(waiter->second.keys).empty()) continue;
    woken.push_back({connection, ok_reply_for(waiter->second)});
    unindex(connection, waiter->second.keys);
    waiters_.erase(waiter);
  }
  return woken;
}

std::vector<Delivery> ServerState::expire(TimePoint now) {
  std::vector<Delivery> expired;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    expired.push_back({it->first, encode_timeout_reply(missing(it->second.keys))});
    unindex(it->first, it->second.keys);
    it = waiters_.erase(it);
  }
  return expired;
}

void ServerState::cancel(std::uint64_t connection) {
  const auto it = waiters_.find(connection);
  if (it == waiters_.end()) return;
  unindex(connection, it->second.keys);
  waiters_.erase(it);
}

std::optional<TimePoint> ServerState::next_deadline() const {
  std::optional<TimePoint> earliest;
  for (const auto& entry : waiters_) {
    if (!earliest || entry.second.deadline < *earliest) earliest = entry.second.deadline;
  }
  return earliest;
}

std::vector<std::string> ServerState::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> result;
  for (const std::string& key : keys) {
    if (values_.find(key) == values_.end()) result.push_back(key);
  }
  return result;
}

std::string ServerState::ok_reply_for(const Waiter& waiter) const {
  if (waiter.command == Command::kGet) return bytes_frame(values_.at(waiter.keys.front()));
  return ok_frame();
}

void ServerState::unindex(std::uint64_t connection, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    const auto it = waiters_by_key_.find(key);
    if (it == waiters_by_key_.end()) continue;
    std::vector<std::uint64_t>& ids = it->second;
    ids.erase(std::remove(ids.begin(), ids.end(), connection), ids.end());
    if (ids.empty()) waiters_by_key_.erase(it);
  }
}

}  // namespace store_internal
}  // namespace groupcoord
