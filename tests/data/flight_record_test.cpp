// The flight record's file format: what FlightRecorder writes, read_flight_record reads back for
// the same execution only, keeping the last kFlightSlots collectives; anything else is no record.
#include "data/flight_record.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/data/record_printers.h"

namespace cprr {
namespace {

class FlightRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cprr-flight-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = flight_record_path(dir_, 1);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_, path_;
};

CollectiveRecord call(uint64_t seq, std::string kind, uint64_t bytes) {
  CollectiveRecord c;
  c.seq = seq;
  c.kind = std::move(kind);
  c.stream = 2;
  c.dtype = DType::f64;
  c.bytes = bytes;
  c.root = seq == 1 ? 3 : -1;
  c.op = ReduceOp::max;
  if (seq % 2 == 1) {  // every other one in a group, or a message with its caller's line
    c.group = static_cast<uint32_t>(seq);
    c.members = uint64_t{1} << 63 | seq;
    c.peer = seq == 3 ? 5 : -1;
    c.where = seq == 3 ? std::string(100, 'd') + "/stage.py:41" : "tp.py:9";
  }
  return c;
}

// What the record gives back for `calls`: a caller's line too long for the entry keeps its end,
// the file and line.
std::vector<CollectiveRecord> as_read(std::vector<CollectiveRecord> calls) {
  for (CollectiveRecord& c : calls) {
    if (c.where.size() > 59) c.where = c.where.substr(c.where.size() - 59);
  }
  return calls;
}

TEST_F(FlightRecordTest, WhatWasEnteredReadsBackForItsExecutionOnly) {
  EXPECT_EQ(path_, dir_ + "/flight-1");
  FlightRecorder rec(path_);
  rec.begin(7);
  const std::vector<CollectiveRecord> calls{call(0, "all_reduce", 4096), call(1, "broadcast", 8),
                                            call(2, "all_to_all_v", 96), call(3, "barrier", 0),
                                            call(4, "all_gather", 12)};
  for (const auto& c : calls) rec.enter(c);
  const auto got = read_flight_record(path_, 7);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, as_read(calls));
  EXPECT_EQ((*got)[3].where.substr(47), "/stage.py:41");
  // The rank never started execution 8: nothing of 7 is its record.
  EXPECT_FALSE(read_flight_record(path_, 8).has_value());
  // A new execution starts empty.
  rec.begin(8);
  ASSERT_TRUE(read_flight_record(path_, 8).has_value());
  EXPECT_TRUE(read_flight_record(path_, 8)->empty());
  EXPECT_FALSE(read_flight_record(path_, 7).has_value());
}

// A Python case's collectives have kinds beyond the C++ ones (and a reduction in the kind): each
// reads back by its name, so the live check tells a reduce_scatter from an all_gather. A name
// longer than the entry's field is cut, never run into the next field.
TEST_F(FlightRecordTest, AnyKindReadsBackByItsName) {
  FlightRecorder rec(path_);
  rec.begin(3);
  const std::vector<CollectiveRecord> calls{
      call(0, "reduce_scatter", 64), call(1, "all_reduce(product)", 64),
      call(2, "reduce_scatter(premul_sum)", 64), call(3, "gather", 64), call(4, "", 0)};
  for (const auto& c : calls) rec.enter(c);
  rec.enter(call(5, std::string(40, 'k'), 8));
  const auto got = read_flight_record(path_, 3);
  ASSERT_TRUE(got.has_value());
  std::vector<CollectiveRecord> want = as_read(calls);
  want.push_back(call(5, std::string(31, 'k'), 8));  // the long kind, cut to the entry's field
  EXPECT_EQ(*got, want);
}

TEST_F(FlightRecordTest, EachEntryHoldsWhenItWasEnteredOnTheSteadyClock) {
  const auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  FlightRecorder rec(path_);
  rec.begin(3);
  const int64_t before = now_ns();
  rec.enter(call(0, "all_reduce", 64));
  rec.enter(call(1, "barrier", 0));
  const int64_t after = now_ns();
  const auto log = read_flight_log(path_, 3);
  ASSERT_TRUE(log.has_value());
  ASSERT_EQ(log->entered.size(), 2u);
  ASSERT_EQ(log->entered_ns.size(), 2u);
  EXPECT_GE(log->entered_ns[0], before);
  EXPECT_LE(log->entered_ns[0], log->entered_ns[1]);
  EXPECT_LE(log->entered_ns[1], after);
}

TEST_F(FlightRecordTest, TheRingKeepsTheLastCollectives) {
  FlightRecorder rec(path_);
  rec.begin(1);
  const uint64_t n = kFlightSlots + 10;
  for (uint64_t i = 0; i < n; ++i) rec.enter(call(i, "all_reduce", i));
  const auto got = read_flight_record(path_, 1);
  ASSERT_TRUE(got.has_value());
  // A full ring's oldest slot is the next one written (maybe mid-write as it is read): not read.
  ASSERT_EQ(got->size(), kFlightSlots - 1);
  EXPECT_EQ(got->front().seq, 11u);
  EXPECT_EQ(got->back().seq, n - 1);
  EXPECT_EQ(got->back().bytes, n - 1);
}

TEST_F(FlightRecordTest, AMissingOrForeignFileIsNoRecord) {
  EXPECT_FALSE(read_flight_record(path_, 0).has_value());
  std::ofstream(path_) << "not a flight record";
  EXPECT_FALSE(read_flight_record(path_, 0).has_value());
  {
    FlightRecorder rec(path_);  // truncates the foreign file and starts over
    rec.begin(3);
    rec.enter(call(0, "all_reduce", 4));
  }
  // The record outlives its writer: the controller reads it after the rank died.
  ASSERT_TRUE(read_flight_record(path_, 3).has_value());
  std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
  f.write("XXXX", 4);  // the magic
  f.close();
  EXPECT_FALSE(read_flight_record(path_, 3).has_value());
}

TEST_F(FlightRecordTest, AnUnwritableDirectoryIsAnErrorNamingThePath) {
  try {
    FlightRecorder rec(dir_ + "/missing/flight-0");
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("missing/flight-0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cprr
