// Numbers read from the environment: unset is "not given", anything else must be a number in range.
#include "runtime/env_number.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/error.h"
#include "tests/recorder/scoped_env.h"

namespace cprr {
namespace {

constexpr const char* kVar = "CPRR_TEST_ENV_NUMBER";

std::optional<long long> read_as(const std::string& value) {
  const test::ScopedEnv set(kVar, value);
  return env_number(kVar, 1, 65535, "a port");
}

TEST(EnvNumber, UnsetOrEmptyIsNotGivenAndANumberInRangeIsRead) {
  ::unsetenv(kVar);
  EXPECT_EQ(env_number(kVar, 1, 65535, "a port"), std::nullopt);
  EXPECT_EQ(read_as(""), std::nullopt);
  EXPECT_EQ(read_as("1"), 1);
  EXPECT_EQ(read_as("29500"), 29500);
  EXPECT_EQ(read_as("65535"), 65535);
}

TEST(EnvNumber, AnythingElseIsRefusedNamingTheVariableItsValueAndTheRange) {
  for (const char* bad :
       {"0", "65536", "-1", "12ab", " 80", "80 ", "eighty", "1e3", "99999999999999999999999"}) {
    try {
      read_as(bad);
      ADD_FAILURE() << "'" << bad << "' was read";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string(kVar) + "='" + bad +
                    "' is not a port (from 1 to 65535): unset it or give one");
    }
  }
}

}  // namespace
}  // namespace cprr
