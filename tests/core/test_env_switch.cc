// On/off settings from the environment (core/env_switch.h): one spelling rule, and a clear error
// for anything else, so that GROUPCOORD_CPU_SHM=false cannot leave shared memory on.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "core/env_switch.h"
#include "test_support.h"

namespace groupcoord {
namespace {

constexpr const char* kVar = "GROUPCOORD_TEST_ENV_SWITCH";

TEST(EnvSwitch, UnsetAndEmptyGiveTheDefault) {
  {
    testing::ScopedEnv unset(kVar, std::nullopt);
    EXPECT_TRUE(env_bool(kVar, true));
    EXPECT_FALSE(env_bool(kVar, false));
    EXPECT_TRUE(env_switch_on(kVar));
  }
  testing::ScopedEnv empty(kVar, std::string());
  EXPECT_TRUE(env_switch_on(kVar));
  EXPECT_FALSE(env_bool(kVar, false));
}

TEST(EnvSwitch, EverySpellingOfOffAndOn) {
  for (const char* off : {"0", "false", "off", "no", "FALSE", "Off", "NO"}) {
    testing::ScopedEnv env(kVar, std::string(off));
    EXPECT_FALSE(env_switch_on(kVar)) << off;
    EXPECT_FALSE(env_bool(kVar, true)) << off;
  }
  for (const char* on : {"1", "true", "on", "yes", "TRUE", "On", "Yes"}) {
    testing::ScopedEnv env(kVar, std::string(on));
    EXPECT_TRUE(env_bool(kVar, false)) << on;
  }
}

TEST(EnvSwitch, AnythingElseIsAnErrorNamingTheVariableAndValue) {
  for (const char* bad : {"2", "disable", " 0", "tru"}) {
    testing::ScopedEnv env(kVar, std::string(bad));
    try {
      env_switch_on(kVar);
      FAIL() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(kVar) + "='" + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace groupcoord
