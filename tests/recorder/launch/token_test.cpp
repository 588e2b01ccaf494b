// The run's token: 64 hex digits, fresh each time, compared in constant time.
#include "recorder/launch/token.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>

namespace cprr {
namespace {

TEST(Token, IsSixtyFourHexDigitsAndFreshEachTime) {
  const std::string a = make_token();
  const std::string b = make_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](char c) { return std::isxdigit(c) != 0; }));
  EXPECT_NE(a, b);
}

TEST(Token, EqualOnlyWhenEveryByteAndTheLengthMatch) {
  const std::string t = make_token();
  EXPECT_TRUE(tokens_equal(t, t));
  std::string last = t;
  last.back() = last.back() == '0' ? '1' : '0';
  std::string first = t;
  first.front() = first.front() == '0' ? '1' : '0';
  EXPECT_FALSE(tokens_equal(t, last));
  EXPECT_FALSE(tokens_equal(t, first));
  EXPECT_FALSE(tokens_equal(t, t.substr(0, 63)));
  EXPECT_FALSE(tokens_equal(t, ""));
  EXPECT_TRUE(tokens_equal("", ""));
}

}  // namespace
}  // namespace cprr
