// GROUPCOORD_TIMEOUT_S sets the deadline of every call whose caller gives none. It is read once per
// process, so each case runs in a forked child with its own environment.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <stdexcept>

#include "groupcoord/default_timeout.h"
#include "groupcoord/hash_store.h"
#include "groupcoord/process_group.h"
#include "groupcoord/rendezvous.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using std::chrono::milliseconds;

// Runs `check` in a child with GROUPCOORD_TIMEOUT_S = `value` (nullptr: unset); its exit code.
int in_child(const char* value, const std::function<bool()>& check) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (value != nullptr) {
      ::setenv("GROUPCOORD_TIMEOUT_S", value, 1);
    } else {
      ::unsetenv("GROUPCOORD_TIMEOUT_S");
    }
    bool ok = false;
    try {
      ok = check();
    } catch (...) {
    }
    ::_exit(ok ? 0 : 1);
  }
  return testing::wait_child(pid, std::chrono::seconds(30));
}

TEST(DefaultTimeout, IsThreeHundredSecondsUnlessTheVariableSaysOtherwise) {
  EXPECT_EQ(in_child(nullptr, [] { return default_timeout() == kBuiltinTimeout; }), 0);
  EXPECT_EQ(in_child("7", [] { return default_timeout() == milliseconds(7000); }), 0);
  EXPECT_EQ(in_child("0.25", [] { return default_timeout() == milliseconds(250); }), 0);
}

TEST(DefaultTimeout, EveryDefaultFollowsIt) {
  EXPECT_EQ(in_child("12",
                     [] {
                       const milliseconds want(12000);
                       HashStore store;
                       return ProcessGroupOptions{}.timeout == want &&
                              RendezvousOptions{}.timeout == want && store.timeout() == want;
                     }),
            0);
}

TEST(DefaultTimeout, ABadValueIsAnErrorNamingTheVariable) {
  for (const char* bad : {"abc", "-5", "0", "10s"}) {
    EXPECT_EQ(in_child(bad,
                       [] {
                         try {
                           default_timeout();
                         } catch (const std::invalid_argument& e) {
                           return std::string(e.what()).find("GROUPCOORD_TIMEOUT_S") !=
                                  std::string::npos;
                         }
                         return false;
                       }),
              0)
        << bad;
  }
}

}  // namespace
}  // namespace groupcoord
