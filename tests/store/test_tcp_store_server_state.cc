// The server's table and parked waits without sockets (private ServerState), driven with
// hand-built payloads and explicit clocks so that deadlines are exact.
#include "store/tcp_store_server_state.h"

#include <gtest/gtest.h>

#include <string>

#include "store_test_util.h"

namespace groupcoord {
namespace {

using namespace std::chrono_literals;
using store_internal::RequestResult;
using store_internal::ServerState;
using store_internal::TimePoint;
using store_test::field;
using store_test::le32;
using store_test::le64;

constexpr char kOk = 0;
constexpr char kTimeout = 1;

std::string set_request(const std::string& key, const std::string& value) {
  return std::string(1, 1) + field(key) + field(value);
}
std::string get_request(const std::string& key, std::int64_t timeout_ms) {
  return std::string(1, 2) + field(key) + le64(timeout_ms);
}
std::string wait_request(const std::vector<std::string>& keys, std::int64_t timeout_ms) {
  std::string out = std::string(1, 6) + le32(static_cast<std::uint32_t>(keys.size()));
  for (const auto& key : keys) out += field(key);
  return out + le64(timeout_ms);
}

/// A reply frame's payload (its length prefix removed).
std::string payload(const std::string& frame) { return frame.substr(4); }

class ServerStateTest : public ::testing::Test {
 protected:
  ServerStateTest() : state_(limits()) {}
  static store_internal::ProtocolLimits limits() {
    store_internal::ProtocolLimits limits;
    limits.max_key_bytes = 64;
    limits.max_value_bytes = 1024;
    limits.max_keys_per_request = 8;
    return limits;
  }
  RequestResult run(std::uint64_t connection, const std::string& request) {
    return state_.handle(connection, request, now_);
  }

  ServerState state_;
  TimePoint now_ = store_internal::Clock::now();
};

TEST_F(ServerStateTest, GetOfMissingKeyParksUntilSet) {
  EXPECT_EQ(run(1, get_request("k", 1000)).kind, RequestResult::Kind::kParked);
  EXPECT_EQ(state_.num_waiters(), 1u);
  RequestResult set = run(2, set_request("k", "value"));
  EXPECT_EQ(payload(set.frame), std::string(1, kOk));
  ASSERT_EQ(set.woken.size(), 1u);
  EXPECT_EQ(set.woken[0].connection, 1u);
  EXPECT_EQ(payload(set.woken[0].frame), std::string(1, kOk) + field("value"));
  EXPECT_EQ(state_.num_waiters(), 0u);
}

TEST_F(ServerStateTest, WaitWakesOnlyWhenAllKeysExist) {
  EXPECT_EQ(run(1, wait_request({"a", "b"}, 1000)).kind, RequestResult::Kind::kParked);
  EXPECT_TRUE(run(2, set_request("a", "1")).woken.empty());
  EXPECT_EQ(run(2, set_request("b", "2")).woken.size(), 1u);
}

TEST_F(ServerStateTest, ExpiryAnswersWithTheMissingKeysAtTheDeadline) {
  run(1, wait_request({"a", "b"}, 100));
  run(2, set_request("a", "1"));
  EXPECT_TRUE(state_.expire(now_ + 99ms).empty());
  ASSERT_TRUE(state_.next_deadline().has_value());
  EXPECT_EQ(*state_.next_deadline(), now_ + 100ms);
  auto expired = state_.expire(now_ + 100ms);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(payload(expired[0].frame), std::string(1, kTimeout) + le32(1) + field("b"));
  EXPECT_FALSE(state_.next_deadline().has_value());
}

TEST_F(ServerStateTest, CancelForgetsAClosedConnection) {
  run(1, get_request("k", 1000));
  state_.cancel(1);
  EXPECT_EQ(state_.num_waiters(), 0u);
  EXPECT_TRUE(run(2, set_request("k", "v")).woken.empty());
}

TEST_F(ServerStateTest, MalformedRequestsAreProtocolErrorsAndChangeNothing) {
  const std::vector<std::string> bad = {
      std::string(),                                                    // no command
      std::string(1, 42),                                               // unknown command
      set_request("k", "v") + "x",                                      // trailing byte
      set_request("", "v"),                                             // empty key
      set_request(std::string(65, 'k'), "v"),                           // key over the limit
      set_request("k", std::string(1025, 'v')),                         // value over the limit
      wait_request({"a", "b", "c", "d", "e", "f", "g", "h", "i"}, 10),  // too many keys
      get_request("k", -1),                                             // negative timeout
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(run(1, bad[i]).kind, RequestResult::Kind::kProtocolError) << "case " << i;
  }
  EXPECT_EQ(payload(run(1, std::string(1, 8)).frame), std::string(1, kOk) + le64(0));
}

}  // namespace
}  // namespace groupcoord
