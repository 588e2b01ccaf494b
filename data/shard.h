#pragma once
// A shard of a plan (cprecord --shard I/N) and run.shard's text form, which the recorder writes
// and a merge of shard databases (schema/store_merge.h) reads back.
#include <cstdint>
#include <optional>
#include <string>

namespace cprr {

/// One of N stable parts of a plan (recorder/engine/plan.h says which cases are in which).
struct Shard {
  uint32_t index = 1;  ///< 1-based
  uint32_t count = 1;
  /// The plan was split by recorded case times (--by-time), not by each label's hash.
  bool by_time = false;
};

/// Parses "I/N" (1 <= I <= N); nullopt otherwise.
std::optional<Shard> parse_shard(const std::string& text);

/// run.shard: "I/N", with " by time" when --by-time split the plan.
std::string shard_text(const Shard& shard);

/// run.shard read back: "" (a run of the whole plan) is 1/1; nullopt for text no cprr writes.
std::optional<Shard> shard_of_run(const std::string& text);

}  // namespace cprr
