// Name resolution with a deadline (src/store/resolver.h): numeric addresses inline, names on a
// helper thread the caller stops waiting for at the deadline.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "store/resolver.h"

namespace groupcoord {
namespace store_internal {
namespace {

using std::chrono::milliseconds;

TEST(Resolver, NumericAddressesResolveInline) {
  for (const char* host : {"127.0.0.1", "::1"}) {
    std::string error;
    // An already expired deadline: numeric addresses never wait, so it does not matter.
    AddrInfoPtr found = resolve_before(host, 1234, false, Clock::now(), &error);
    if (std::string(host) == "::1" && !found) continue;  // a machine without IPv6
    ASSERT_NE(found, nullptr) << host << ": " << error;
    EXPECT_EQ(found->ai_socktype, SOCK_STREAM);
  }
}

TEST(Resolver, NamesResolveOnAHelperThread) {
  std::string error;
  AddrInfoPtr found =
      resolve_before("localhost", 80, false, deadline_after(std::chrono::seconds(10)), &error);
  ASSERT_NE(found, nullptr) << error;
}

TEST(Resolver, AnExpiredDeadlineReturnsAtOnceAndTheLateAnswerIsDropped) {
  for (int i = 0; i < 20; ++i) {
    std::string error;
    const auto start = Clock::now();
    AddrInfoPtr found = resolve_before("localhost", 80, false, Clock::now(), &error);
    EXPECT_LT(Clock::now() - start, milliseconds(200));
    if (!found) EXPECT_NE(error.find("deadline"), std::string::npos) << error;
  }
  std::this_thread::sleep_for(milliseconds(300));  // the helpers finish and free their answers
}

TEST(Resolver, UnknownNamesFailWithinTheDeadline) {
  std::string error;
  const auto start = Clock::now();
  AddrInfoPtr found = resolve_before("no-such-host.invalid", 80, false,
                                     deadline_after(std::chrono::seconds(2)), &error);
  EXPECT_EQ(found, nullptr);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(3000));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace store_internal
}  // namespace groupcoord
