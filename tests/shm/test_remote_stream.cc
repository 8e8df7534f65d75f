// The message queue's TCP stream to readers on other nodes (shm/remote_fanout.h,
// shm/remote_inbox.h), writer and reader as threads of one process over loopback: messages and
// the writer-failure flag arrive as sent, and a writer and a reader of different stream versions
// (ranks of different groupcoord builds) refuse each other at once, saying so.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>

#include "core/deadline.h"
#include "groupcoord/bytes.h"
#include "shm/remote_fanout.h"
#include "shm/remote_inbox.h"
#include "store/socket.h"

namespace groupcoord {
namespace shm {
namespace {

using namespace std::chrono_literals;

constexpr auto kTimeout = std::chrono::milliseconds(20000);

Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }
std::string text_of(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

TEST(RemoteStream, MessagesAndTheFailureFlagArriveAsSent) {
  RemoteEndpoint endpoint;
  RemoteFanout fanout("mq[test]", {1}, &endpoint);
  ASSERT_EQ(endpoint.ok, 1) << endpoint.error;
  EXPECT_EQ(endpoint.stream_version, kRemoteStreamVersion);
  auto accepted =
      std::async(std::launch::async, [&] { return fanout.accept_all(Deadline(kTimeout)); });
  std::string error;
  RemoteInbox inbox("mq[test]", "rank 0", endpoint, 1, Deadline(kTimeout), &error);
  ASSERT_EQ(error, "");
  ASSERT_EQ(accepted.get(), "");

  fanout.send(bytes_of("step 7"), /*writer_failure=*/false, Deadline(kTimeout));
  fanout.send(bytes_of("cannot pickle"), /*writer_failure=*/true, Deadline(kTimeout));
  bool failed = true;
  EXPECT_EQ(text_of(inbox.receive(Deadline(kTimeout), &failed)), "step 7");
  EXPECT_FALSE(failed);
  EXPECT_EQ(text_of(inbox.receive(Deadline(kTimeout), &failed)), "cannot pickle");
  EXPECT_TRUE(failed);
}

TEST(RemoteStream, TheWriterRefusesAReaderOfAnotherVersionAtOnce) {
  RemoteEndpoint endpoint;
  RemoteFanout fanout("mq[test]", {1}, &endpoint);
  ASSERT_EQ(endpoint.ok, 1) << endpoint.error;
  const auto start = std::chrono::steady_clock::now();
  auto accepted =
      std::async(std::launch::async, [&] { return fanout.accept_all(Deadline(kTimeout)); });
  // A reader of a build from before the versions: its hello's last word was 0.
  const auto until = store_internal::deadline_after(kTimeout);
  std::string why;
  store_internal::UniqueFd fd =
      store_internal::try_connect_tcp(endpoint.host, endpoint.port, until, &why);
  ASSERT_TRUE(fd.valid()) << why;
  RemoteHello hello;
  hello.token = endpoint.token;
  hello.rank = 1;
  hello.stream_version = 0;
  int err = 0;
  ASSERT_EQ(store_internal::send_all(fd.get(), reinterpret_cast<const char*>(&hello), sizeof hello,
                                     until, &err),
            store_internal::IoStatus::kOk);
  const std::string error = accepted.get();
  EXPECT_NE(error.find("remote reader rank 1 frames messages as stream version 0 (a build from "
                       "before the versions), this writer as version " +
                       std::to_string(kRemoteStreamVersion) + ":"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("different groupcoord builds"), std::string::npos) << error;
  EXPECT_LT(std::chrono::steady_clock::now() - start, kTimeout / 4) << "not at once";
}

TEST(RemoteStream, AReaderRefusesAWriterOfAnotherVersion) {
  RemoteEndpoint endpoint;
  RemoteFanout fanout("mq[test]", {1}, &endpoint);
  ASSERT_EQ(endpoint.ok, 1) << endpoint.error;
  auto accepted =
      std::async(std::launch::async, [&] { return fanout.accept_all(Deadline(kTimeout)); });
  RemoteEndpoint announced = endpoint;
  announced.stream_version = kRemoteStreamVersion + 1;  // what a later build's writer would say
  std::string error;
  RemoteInbox inbox("mq[test]", "rank 0", announced, 1, Deadline(kTimeout), &error);
  EXPECT_NE(error.find("the writer (rank 0) frames messages as stream version " +
                       std::to_string(kRemoteStreamVersion + 1) + ", this reader as version " +
                       std::to_string(kRemoteStreamVersion)),
            std::string::npos)
      << error;
  // Its hello went first (this writer speaks the reader's version, so it accepts): a writer of
  // really another version learns of the mismatch from it, as the test above shows.
  EXPECT_EQ(accepted.get(), "");
}

}  // namespace
}  // namespace shm
}  // namespace groupcoord
