#include <gtest/gtest.h>

#include <stdexcept>

#include "groupcoord/init_method.h"

namespace groupcoord {
namespace {

TEST(InitMethod, Env) {
  EXPECT_EQ(InitMethod::parse("env://").kind, InitMethod::Kind::Env);
  EXPECT_EQ(InitMethod::parse("").kind, InitMethod::Kind::Env);
}

TEST(InitMethod, Tcp) {
  InitMethod m = InitMethod::parse("tcp://10.1.2.3:29500");
  EXPECT_EQ(m.kind, InitMethod::Kind::Tcp);
  EXPECT_EQ(m.host, "10.1.2.3");
  EXPECT_EQ(m.port, 29500);
  EXPECT_EQ(m.str(), "tcp://10.1.2.3:29500");

  InitMethod v6 = InitMethod::parse("tcp://[::1]:1234");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 1234);
  EXPECT_EQ(v6.str(), "tcp://[::1]:1234");
}

TEST(InitMethod, File) {
  InitMethod m = InitMethod::parse("file:///tmp/rdzv");
  EXPECT_EQ(m.kind, InitMethod::Kind::File);
  EXPECT_EQ(m.path, "/tmp/rdzv");
  EXPECT_EQ(m.str(), "file:///tmp/rdzv");
}

TEST(InitMethod, RejectsBadInput) {
  for (const char* bad : {"tcp://host", "tcp://host:", "tcp://:80", "tcp://h:0", "tcp://h:70000",
                          "tcp://h:12ab", "file://relative", "file://", "udp://h:1", "nonsense"}) {
    EXPECT_THROW(InitMethod::parse(bad), std::invalid_argument) << bad;
  }
  try {
    InitMethod::parse("udp://h:1");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("udp://h:1"), std::string::npos);
  }
}

}  // namespace
}  // namespace groupcoord
