#include "cli/trace.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/op_accesses.h"
#include "analysis/race_check.h"
#include "data/text_forms.h"
#include "runtime/atomic_file.h"
#include "runtime/error.h"

namespace cprr {
namespace {

using json = nlohmann::json;

constexpr int kHostTid = 0;  // streams are tid stream + 1

// An op's event, for the flows that join it to others.
struct Slice {
  int pid = 0;
  int tid = 0;
  double ts = 0;
  double dur = 0;
  double middle() const { return ts + dur / 2; }
};

// Host waits and host accesses are the host thread's; every other op its stream's.
int tid_of(const OpRecord& op) {
  return op.stream < 0 || op.kind == "sync" || op.kind == "host" ? kHostTid : op.stream + 1;
}

std::string op_title(const OpRecord& op) {
  return op.name == op.kind ? op.kind : op.kind + " " + op.name;
}

// "'name' [offset, end)" for each buffer an op reads or writes; a log without spans (an older
// record) touches whole buffers, as the allocation log sizes them.
json accesses(const std::vector<uint32_t>& ids, const std::vector<ByteSpan>& spans,
              const std::map<uint32_t, const AllocRecord*>& buffers) {
  json out = json::array();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto it = buffers.find(ids[i]);
    if (it == buffers.end()) {
      out.push_back(fmt::format("buffer {}", ids[i]));
      continue;
    }
    const ByteSpan span = i < spans.size() ? spans[i] : ByteSpan{0, it->second->bytes};
    out.push_back(
        fmt::format("'{}' [{}, {})", it->second->name, span.offset, span.offset + span.bytes));
  }
  return out;
}

class TraceBuilder {
 public:
  explicit TraceBuilder(const ExecutionResult& e) : e_(e), origin_(earliest_start(e)) {}

  json build() {
    for (std::size_t r = 0; r < e_.ranks.size(); ++r) {
      if (e_.ranks[r].done) add_rank(static_cast<int>(r), e_.ranks[r].done->capture);
    }
    add_collective_flows();
    add_message_flows();
    add_race_flows();
    json groups = json::array();
    for (const GroupRecord& g : groups_of(e_)) {
      groups.push_back(
          {{"id", g.id}, {"ranks", g.ranks}, {"backend", g.backend}, {"name", g.name}});
    }
    return json{{"traceEvents", std::move(events_)},
                {"displayTimeUnit", "ns"},
                {"otherData",
                 {{"tool", "cprr"},
                  {"label", e_.label},
                  {"mode", std::string(mode_name(e_.mode))},
                  {"status", std::string(status_name(e_.status))},
                  {"summary", e_.summary},
                  {"groups", std::move(groups)}}}};
  }

 private:
  static int64_t earliest_start(const ExecutionResult& e) {
    int64_t origin = INT64_MAX;
    for (const RankReport& r : e.ranks) {
      if (r.done && !r.done->capture.timeline.empty()) {
        origin = std::min(origin, r.done->capture.timeline.start_ns);
      }
    }
    return origin == INT64_MAX ? 0 : origin;
  }

  double micros(int64_t ns) const { return static_cast<double>(ns - origin_) / 1000.0; }

  void metadata(const char* what, int pid, int tid, json args) {
    events_.push_back(
        {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}});
  }

  void add_rank(int rank, const CaseCapture& cap) {
    const Timeline& tl = cap.timeline;
    if (tl.empty()) return;
    metadata("process_name", rank, kHostTid, {{"name", fmt::format("rank {}", rank)}});
    metadata("process_sort_index", rank, kHostTid, {{"sort_index", rank}});
    std::set<int> tids{kHostTid};
    std::map<uint32_t, const AllocRecord*> buffers;
    for (const AllocRecord& a : cap.allocs) buffers.emplace(a.buffer, &a);
    // A collective op names its group and number (event, epoch); in a record from before
    // groups (event -1) the k-th collective op is collective record k.
    std::size_t collective = 0;
    for (std::size_t i = 0; i < cap.ops.size() && i < tl.ops.size(); ++i) {
      const OpRecord& op = cap.ops[i];
      const OpTime& t = tl.ops[i];
      const bool is_collective = op.kind == "collective";
      const std::size_t record = is_collective ? collective++ : 0;
      if (t.begin_ns < 0 || t.end_ns < t.begin_ns) continue;  // its stream never got there
      const Slice s{rank, tid_of(op), micros(t.begin_ns),
                    static_cast<double>(t.end_ns - t.begin_ns) / 1000.0};
      tids.insert(s.tid);
      json args{{"op", op.seq},
                {"stream", op.stream},
                {"reads", accesses(op.reads, op.read_spans, buffers)},
                {"writes", accesses(op.writes, op.write_spans, buffers)}};
      if (!op.touches.empty()) {  // accesses of unknown direction, or left unchanged (probed)
        args[op.probed ? "unchanged" : "uses"] = accesses(op.touches, op.touch_spans, buffers);
      }
      if (op.event >= 0) args["event"] = op.event;
      if (op.peer >= 0) args["peer"] = op.peer;
      events_.push_back({{"ph", "X"},
                         {"name", op_title(op)},
                         {"cat", op.kind},
                         {"pid", s.pid},
                         {"tid", s.tid},
                         {"ts", s.ts},
                         {"dur", s.dur},
                         {"args", std::move(args)}});
      slices_[{rank, op.seq}] = s;
      if (const auto m = message_of(rank, op); m && s.dur > 0) messages_[*m].push_back(s);
      if (is_collective && op.event >= 0) {
        collectives_[{static_cast<uint32_t>(op.event), op.epoch, op.name}].push_back(s);
      } else if (is_collective && record < cap.collectives.size()) {
        const CollectiveRecord& c = cap.collectives[record];
        collectives_[{c.group, c.seq, c.kind}].push_back(s);
      }
    }
    for (std::size_t i = 0; i < cap.allocs.size() && i < tl.allocs.size(); ++i) {
      const AllocRecord& a = cap.allocs[i];
      events_.push_back({{"ph", "i"},
                         {"s", "t"},
                         {"name", fmt::format("{} '{}'", a.is_free ? "free" : "alloc", a.name)},
                         {"cat", a.is_free ? "free" : "alloc"},
                         {"pid", rank},
                         {"tid", kHostTid},
                         {"ts", micros(tl.allocs[i])},
                         {"args",
                          {{"buffer", a.buffer},
                           {"bytes", a.bytes},
                           {"pool", a.pool},
                           {"offset", a.offset},
                           {"stream", a.stream}}}});
    }
    for (int tid : tids) {
      metadata(
          "thread_name", rank, tid,
          {{"name", tid == kHostTid ? std::string("host") : fmt::format("stream {}", tid - 1)}});
      metadata("thread_sort_index", rank, tid, {{"sort_index", tid}});
    }
  }

  // One flow through `points` in time order: "s" at the first, "t" at the middle ones, "f" at
  // the last, each at its slice's middle so it binds to that slice.
  void add_flow(std::vector<Slice> points, const std::string& name, const char* cat, json args) {
    if (points.size() < 2) return;
    std::sort(points.begin(), points.end(),
              [](const Slice& a, const Slice& b) { return a.middle() < b.middle(); });
    const uint64_t id = next_flow_id_++;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const char* ph = i == 0 ? "s" : i + 1 == points.size() ? "f" : "t";
      json ev{{"ph", ph},
              {"id", id},
              {"name", name},
              {"cat", cat},
              {"pid", points[i].pid},
              {"tid", points[i].tid},
              {"ts", points[i].middle()}};
      if (i + 1 == points.size()) ev["bp"] = "e";  // bind to the enclosing slice
      if (i == 0) ev["args"] = args;
      events_.push_back(std::move(ev));
    }
  }

  void add_collective_flows() {
    for (auto& [key, points] : collectives_) {
      const auto& [group, seq, kind] = key;
      add_flow(points,
               group == 0 ? fmt::format("{} #{}", kind, seq)
                          : fmt::format("{} #{} (group {})", kind, seq, group),
               "collective", {{"collective", seq}, {"group", group}});
    }
  }

  // A C++ case's send or recv: a stream op naming its peer, group (event) and number (epoch).
  using MessageKey = std::tuple<uint32_t, int, int, uint64_t>;  // group, sender, receiver, seq
  static std::optional<MessageKey> message_of(int rank, const OpRecord& op) {
    if (!op.is_message()) return std::nullopt;
    const auto [sender, receiver] = op.message_ends(rank);
    return MessageKey{static_cast<uint32_t>(op.event), sender, receiver, op.epoch};
  }

  void add_message_flows() {
    for (auto& [key, points] : messages_) {
      const auto& [group, sender, receiver, seq] = key;
      add_flow(points, fmt::format("message #{} rank {} -> rank {}", seq, sender, receiver),
               "message",
               {{"message", seq}, {"group", group}, {"sender", sender}, {"receiver", receiver}});
    }
  }

  void add_race_flows() {
    HbResult hb;
    try {
      hb = check_execution(e_);
    } catch (const std::exception&) {
      return;  // logs that contradict each other have no races to draw
    }
    for (const Race& race : hb.races) {
      const auto a = slices_.find({race.first.rank, race.first.seq});
      const auto b = slices_.find({race.second.rank, race.second.seq});
      if (a == slices_.end() || b == slices_.end()) continue;
      const RaceOverlap& o = race.overlaps.front();
      add_flow({a->second, b->second}, fmt::format("race on '{}'", o.first_buffer_name), "race",
               {{"first", race.first.describe()},
                {"second", race.second.describe()},
                {"bytes", fmt::format("[{}, {}) of rank {}'s {} pool", o.begin, o.end,
                                      o.memory_rank, pool_name(o.pool))},
                {"fix", race.fix},
                {"fix_verified", race.fix_verified}});
    }
  }

  const ExecutionResult& e_;
  int64_t origin_;
  json events_ = json::array();
  std::map<std::pair<int, uint64_t>, Slice> slices_;  // (rank, op seq) -> its event
  /// (collective seq, kind) -> its slice on each rank; ranks that disagree on the kind (a
  /// collective mismatch) get no arrow between them.
  std::map<std::tuple<uint32_t, uint64_t, std::string>, std::vector<Slice>> collectives_;
  /// A message's send and recv slices (group, sender, receiver, number).
  std::map<MessageKey, std::vector<Slice>> messages_;
  uint64_t next_flow_id_ = 1;
};

}  // namespace

bool has_timeline(const ExecutionResult& e) {
  return std::any_of(e.ranks.begin(), e.ranks.end(), [](const RankReport& r) {
    return r.done && !r.done->capture.timeline.empty();
  });
}

std::string trace_json(const ExecutionResult& e) { return TraceBuilder(e).build().dump(); }

void write_trace_file(const char* option, const std::string& path, const ExecutionResult& e) {
  write_file_atomically(option, path, trace_json(e));
}

}  // namespace cprr
