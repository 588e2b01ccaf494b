// Case registration (recorder/api/case.h): a name defined twice is an error naming both
// definitions, and CPRR_CASE's registration knows the file and line of the case author's macro.
#include "recorder/api/case.h"

#include <gtest/gtest.h>

#include <string>

namespace cprr {
namespace {

TEST(Registry, ANameDefinedTwiceNamesBothDefinitionsAndKeepsTheFirst) {
  Registry r;
  r.add_case("test/twice", CaseOptions{.world_sizes = {2}}, nullptr, "first.cpp:3");
  r.add_case("test/twice", CaseOptions{.world_sizes = {4}}, nullptr, "second.cpp:9");
  ASSERT_EQ(r.errors().size(), 1u);
  EXPECT_EQ(r.errors()[0],
            "case 'test/twice' is defined twice: at first.cpp:3 and at second.cpp:9; give one of "
            "them another name");
  ASSERT_EQ(r.cases().size(), 1u);
  EXPECT_EQ(r.cases()[0].info.options.world_sizes, std::vector<int>{2});
  r.add_case("test/twice", CaseOptions{.world_sizes = {2}}, nullptr);  // where unknown
  EXPECT_EQ(r.errors().back(), "case 'test/twice' is registered twice");
}

TEST(Registry, RegisterCaseRecordsWhereItWasCalled) {
  const int line = __LINE__ + 1;
  register_case("test/registered_here", CaseOptions{.world_sizes = {1}}, nullptr);
  const RegisteredCase* c = registry().find("test/registered_here");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->where, "case_test.cpp:" + std::to_string(line));
}

}  // namespace
}  // namespace cprr
