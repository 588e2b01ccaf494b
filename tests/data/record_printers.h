#pragma once
// GoogleTest printers for the record types, which compare themselves (operator==): a failed
// EXPECT_EQ(want, got) prints both records field by field instead of their raw bytes. A record
// with a serialize() (the wire's and the store's) prints its fields in that order; the two that
// have none print here in declaration order.
#include <gtest/gtest.h>

#include <ostream>
#include <type_traits>

#include "data/case_info.h"
#include "data/execution.h"

namespace cprr {
namespace test {

/// An archive in cereal's shape: each field a serialize() passes it, printed by GoogleTest.
class PrintArchive {
 public:
  explicit PrintArchive(std::ostream* os) : os_(os) {}
  template <class... Fields>
  void operator()(const Fields&... fields) {
    ((*os_ << (first_ ? "" : ", ") << ::testing::PrintToString(fields), first_ = false), ...);
  }

 private:
  std::ostream* os_;
  bool first_ = true;
};

/// "{field, field, ...}".
template <class... Fields>
void print_fields(std::ostream* os, const Fields&... fields) {
  *os << "{";
  PrintArchive archive(os);
  archive(fields...);
  *os << "}";
}

template <class T>
concept Serialized = std::is_class_v<T> && requires(T& t, PrintArchive& a) {
  t.serialize(a);
};

}  // namespace test

/// A record with a serialize(): "{field, field, ...}" in its order.
template <test::Serialized T>
void PrintTo(const T& record, std::ostream* os) {
  T copy = record;  // serialize() is not const; it only reads through this archive
  *os << "{";
  test::PrintArchive archive(os);
  copy.serialize(archive);
  *os << "}";
}

inline void PrintTo(const RankReport& r, std::ostream* os) {
  test::print_fields(os, r.done, r.watchdog, r.exit, r.protocol_error, r.stdout_tail, r.stderr_tail,
                     r.entered);
}

inline void PrintTo(const ExecutionResult& r, std::ostream* os) {
  test::print_fields(os, r.id, r.case_id, r.label, r.mode, r.attempt, r.world_id, r.pool_position,
                     r.status, r.as_expected, r.summary, r.note, r.ranks,
                     r.started_at.time_since_epoch().count(), r.wall_ms, r.startup_ms,
                     r.startup_phases, r.symmetric_pool, r.collectives, r.rank_gpus, r.interrupted);
}

inline void PrintTo(const CaseInstance& c, std::ostream* os) {
  test::print_fields(os, c.id, c.info, c.params, c.world_size, c.seed);
}

}  // namespace cprr
