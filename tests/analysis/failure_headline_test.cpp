// cprr::failure_headline: the one line a report shows for a rank's failure text.
#include "analysis/failure_headline.h"

#include <gtest/gtest.h>

namespace cprr {
namespace {

TEST(FailureHeadline, APythonTracebackGivesItsExceptionAndTheCaseFileLine) {
  const char* tb =
      "Traceback (most recent call last):\n"
      "  File \"/opt/cprr/lib/cprr/python/cprr/rank/case_body.py\", line 56, in run\n"
      "    definition.body(ctx)\n"
      "  File \"/home/u/tests/test_model.py\", line 12, in pipeline\n"
      "    loss = head(x)[labels]\n"
      "           ^^^^^^^^^^^^^^^\n"
      "IndexError: index 9 is out of bounds for dimension 0 with size 4\n";
  EXPECT_EQ(failure_headline(tb),
            "IndexError: index 9 is out of bounds for dimension 0 with size 4 (test_model.py:12)");
}

TEST(FailureHeadline, AnExceptionInsideALibraryNamesTheCaseLineThatCalledIt) {
  const char* tb =
      "Traceback (most recent call last):\n"
      "  File \"/w/cases/test_dist.py\", line 30, in body\n"
      "    dist.all_reduce(t, group=g)\n"
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", "
      "line 1536, in all_reduce\n"
      "    work = group.allreduce([tensor], opts)\n"
      "RuntimeError: Tensors must be contiguous\n";
  EXPECT_EQ(failure_headline(tb), "RuntimeError: Tensors must be contiguous (test_dist.py:30)");
}

TEST(FailureHeadline, OnlyLibraryFramesNameTheInnermost) {
  const char* tb =
      "Traceback (most recent call last):\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 10, in run\n"
      "    x()\n"
      "  File \"/usr/lib/python3/dist-packages/torch/nn/functional.py\", line 99, in relu\n"
      "    raise TypeError('bad')\n"
      "TypeError: bad\n";
  EXPECT_EQ(failure_headline(tb), "TypeError: bad (functional.py:99)");
}

TEST(FailureHeadline, AChainedTracebackGivesTheExceptionThatEndedTheCase) {
  const char* tb =
      "Traceback (most recent call last):\n"
      "  File \"/w/test_a.py\", line 5, in body\n"
      "    d['x']\n"
      "KeyError: 'x'\n"
      "\n"
      "During handling of the above exception, another exception occurred:\n"
      "\n"
      "Traceback (most recent call last):\n"
      "  File \"/w/test_a.py\", line 7, in body\n"
      "    raise RuntimeError('no x')\n"
      "RuntimeError: no x\n";
  EXPECT_EQ(failure_headline(tb), "RuntimeError: no x (test_a.py:7)");
}

TEST(FailureHeadline, SystemExitAndAMultiLineMessageGiveTheirFirstLine) {
  EXPECT_EQ(failure_headline("Traceback (most recent call last):\n"
                             "  File \"/w/t.py\", line 3, in body\n"
                             "    sys.exit(0)\n"
                             "SystemExit: 0\n"),
            "SystemExit: 0 (t.py:3)");
  EXPECT_EQ(failure_headline("Traceback (most recent call last):\n"
                             "  File \"/w/t.py\", line 8, in body\n"
                             "    raise ValueError('a\\nb')\n"
                             "ValueError: a\n"
                             "b\n"),
            "ValueError: a (t.py:8)");
}

TEST(FailureHeadline, OtherTextGivesItsFirstLineAndSaysMoreFollows) {
  EXPECT_EQ(failure_headline("CPRR_EXPECT failed at cases.cpp:40: x == 3"),
            "CPRR_EXPECT failed at cases.cpp:40: x == 3");
  EXPECT_EQ(failure_headline("\n  \nfirst\nsecond\n"), "first ...");
  EXPECT_EQ(failure_headline("only\n\n"), "only");
  EXPECT_EQ(failure_headline(""), "");
}

TEST(FailureHeadline, ATracebackWithoutAnExceptionLineFallsBackToTheFirstLine) {
  EXPECT_EQ(failure_headline("Traceback (most recent call last):\n"
                             "  File \"/w/t.py\", line 3, in body\n"),
            "Traceback (most recent call last): ...");
}

}  // namespace
}  // namespace cprr
