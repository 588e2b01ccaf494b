#include "analysis/layout_check.h"

#include <fmt/format.h>

#include <array>
#include <string_view>

#include "analysis/compare.h"

namespace cprr {
namespace {

// The pools whose layout every rank must share.
constexpr std::array<std::string_view, 2> kSymmetricPools{"symmetric", "torch_symmetric"};

std::vector<const AllocRecord*> allocations_in(const CaseCapture& c, std::string_view pool) {
  std::vector<const AllocRecord*> out;
  for (const AllocRecord& a : c.allocs) {
    if (!a.is_free && a.pool == pool) out.push_back(&a);
  }
  return out;
}

// The lowest rank with a log: what the others are compared with; -1 when none has one.
template <class Log>
int reference_rank(const std::vector<const Log*>& ranks) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r]) return static_cast<int>(r);
  }
  return -1;
}

std::string side(int32_t rank, bool present, const AllocRecord& a) {
  if (!present) return fmt::format("rank {} has none", rank);
  return fmt::format("rank {} '{}' at offset {} ({} bytes)", rank, a.name, a.offset, a.bytes);
}

}  // namespace

std::string LayoutMismatch::describe() const {
  return fmt::format("{} allocation #{}: {}, {}",
                     pool == "torch_symmetric" ? "torch symmetric-memory" : "symmetric", ordinal,
                     side(rank_a, present_a, a), side(rank_b, present_b, b));
}

namespace {

std::optional<LayoutMismatch> check_pool_layout(const std::vector<const CaseCapture*>& ranks,
                                                int ref, std::string_view pool) {
  const auto want = allocations_in(*ranks[ref], pool);
  for (std::size_t r = ref + 1; r < ranks.size(); ++r) {
    if (!ranks[r]) continue;
    const auto got = allocations_in(*ranks[r], pool);
    for (std::size_t k = 0; k < std::max(want.size(), got.size()); ++k) {
      const bool has_a = k < want.size(), has_b = k < got.size();
      if (has_a && has_b && want[k]->offset == got[k]->offset && want[k]->bytes == got[k]->bytes) {
        continue;
      }
      LayoutMismatch m;
      m.pool = std::string(pool);
      m.ordinal = k;
      m.rank_a = ref;
      m.rank_b = static_cast<int32_t>(r);
      m.present_a = has_a;
      m.present_b = has_b;
      if (has_a) m.a = *want[k];
      if (has_b) m.b = *got[k];
      return m;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<LayoutMismatch> check_symmetric_layout(const std::vector<const CaseCapture*>& ranks) {
  const int ref = reference_rank(ranks);
  if (ref < 0) return std::nullopt;
  for (std::string_view pool : kSymmetricPools) {
    if (auto m = check_pool_layout(ranks, ref, pool)) return m;
  }
  return std::nullopt;
}

std::string CollectiveMismatch::describe() const {
  if (field == "count") {
    return fmt::format("rank {} made {} collective(s), rank {} made {}", rank_a, value_a, rank_b,
                       value_b);
  }
  return fmt::format("collective #{} ({}): rank {} has {} {}, rank {} has {} {}", seq, kind, rank_a,
                     field, value_a, rank_b, field, value_b);
}

namespace {

std::optional<CollectiveMismatch> compare_calls(const CollectiveRecord& a,
                                                const CollectiveRecord& b, int32_t ra, int32_t rb) {
  const auto differ = [&](const char* field, std::string va, std::string vb) {
    return CollectiveMismatch{a.seq, ra, rb, field, std::move(va), std::move(vb), a.kind};
  };
  if (a.kind != b.kind) return differ("kind", a.kind, b.kind);
  if (a.dtype != b.dtype) {
    return differ("dtype", std::string(dtype_name(a.dtype)), std::string(dtype_name(b.dtype)));
  }
  if (a.root != b.root) return differ("root", std::to_string(a.root), std::to_string(b.root));
  if (a.kind == "all_reduce" && a.op != b.op) {
    return differ("op", std::string(reduce_op_name(a.op)), std::string(reduce_op_name(b.op)));
  }
  if (a.kind != "all_to_all_v" && a.bytes != b.bytes) {
    return differ("bytes", std::to_string(a.bytes), std::to_string(b.bytes));
  }
  return std::nullopt;
}

}  // namespace

std::optional<CollectiveMismatch> check_collective_logs(
    const std::vector<const std::vector<CollectiveRecord>*>& logs, bool complete) {
  const int ref = reference_rank(logs);
  if (ref < 0) return std::nullopt;
  const std::vector<CollectiveRecord>& want = *logs[ref];
  for (std::size_t r = ref + 1; r < logs.size(); ++r) {
    if (!logs[r]) continue;
    const std::vector<CollectiveRecord>& got = *logs[r];
    const auto rb = static_cast<int32_t>(r);
    // By sequence number: a flight record holds only an execution's last collectives, so the
    // two logs may start at different numbers.
    std::size_t i = 0, j = 0;
    while (i < want.size() && j < got.size()) {
      if (want[i].seq < got[j].seq) {
        ++i;
      } else if (got[j].seq < want[i].seq) {
        ++j;
      } else if (auto m = compare_calls(want[i++], got[j++], ref, rb)) {
        return m;
      }
    }
    if (complete && want.size() != got.size()) {
      return CollectiveMismatch{
          std::min(want.size(), got.size()), ref, rb, "count", std::to_string(want.size()),
          std::to_string(got.size())};
    }
  }
  return std::nullopt;
}

std::optional<CollectiveMismatch> blocked_mismatch(
    const std::vector<const std::vector<CollectiveRecord>*>& logs) {
  if (logs.size() < 2) return std::nullopt;
  std::vector<std::vector<CollectiveRecord>> last;
  for (const std::vector<CollectiveRecord>* log : logs) {
    if (log == nullptr || log->empty()) return std::nullopt;
    if (!last.empty() && log->back().seq != last.front().front().seq) return std::nullopt;
    // Only what blocks is compared: dtype and reduction are made equal.
    CollectiveRecord call = log->back();
    call.dtype = DType::u8;
    call.op = ReduceOp::sum;
    last.push_back({std::move(call)});
  }
  std::vector<const std::vector<CollectiveRecord>*> calls;
  for (const auto& l : last) calls.push_back(&l);
  return check_collective_logs(calls, /*complete=*/false);
}

std::optional<CollectiveMismatch> check_collectives(const std::vector<const CaseCapture*>& ranks) {
  std::vector<const std::vector<CollectiveRecord>*> logs;
  for (const CaseCapture* c : ranks) logs.push_back(c ? &c->collectives : nullptr);
  return check_collective_logs(logs, /*complete=*/true);
}

std::optional<CollectiveMismatch> check_collectives(const ExecutionResult& e) {
  std::vector<const std::vector<CollectiveRecord>*> logs;
  // A body that threw stopped calling collectives early: only bodies that returned on every
  // rank make their counts comparable.
  bool complete = !e.ranks.empty();
  for (const RankReport& r : e.ranks) {
    logs.push_back(r.done ? &r.done->capture.collectives : &r.entered);
    complete = complete && r.done && r.done->outcome == RankOutcome::ok;
  }
  return check_collective_logs(logs, complete);
}

namespace {

// The first completed execution where `check` finds something.
template <class Mismatch, class Check>
std::optional<Finding<Mismatch>> first_finding(const std::vector<const ExecutionResult*>& execs,
                                               Check check) {
  for (const ExecutionResult* e : execs) {
    if (!completed(*e)) continue;
    if (auto m = check(captures_of(*e))) return Finding<Mismatch>{e->id, e->mode, std::move(*m)};
  }
  return std::nullopt;
}

}  // namespace

CrossRankFindings check_cross_rank(const std::vector<const ExecutionResult*>& executions) {
  CrossRankFindings out{first_finding<LayoutMismatch>(executions, check_symmetric_layout),
                        std::nullopt,
                        first_finding<UninitRead>(executions, check_uninitialized_reads)};
  for (const ExecutionResult* e : executions) {
    if (auto m = check_collectives(*e)) {
      out.collective = Finding<CollectiveMismatch>{e->id, e->mode, std::move(*m)};
      break;
    }
  }
  return out;
}

}  // namespace cprr
