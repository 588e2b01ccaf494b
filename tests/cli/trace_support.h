#pragma once
// Checking a Chrome trace file (cli/trace.h) against the trace-event format, for the trace tests
// of cli/ and of the verbs that write trace files (commands/).
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace cprr::trace_test {

using json = nlohmann::json;

// What the trace-event format requires of `doc`, as a list of problems (empty: valid): every
// event has ph, pid and tid; every timed one a ts >= 0; complete events a dur >= 0; every flow id
// has one start and one finish (steps between), one name and category, in time order, and each
// point lies inside a complete event on its thread (so viewers bind the arrow to that op).
inline std::vector<std::string> trace_problems(const json& doc) {
  std::vector<std::string> out;
  if (!doc.contains("traceEvents") || !doc["traceEvents"].is_array()) return {"no traceEvents"};
  struct Span {
    double ts, dur;
  };
  std::map<std::pair<int, int>, std::vector<Span>> slices;
  std::map<uint64_t, std::vector<json>> flows;
  for (const json& e : doc["traceEvents"]) {
    if (!e.contains("ph") || !e.contains("pid") || !e.contains("tid") ||
        !e["pid"].is_number_integer() || !e["tid"].is_number_integer()) {
      out.push_back("event without ph/pid/tid: " + e.dump());
      continue;
    }
    const std::string ph = e["ph"];
    if (ph == "M") continue;
    if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0) {
      out.push_back("event without a ts >= 0: " + e.dump());
      continue;
    }
    if (ph == "X") {
      if (!e.contains("dur") || e["dur"].get<double>() < 0)
        out.push_back("X without dur: " + e.dump());
      slices[{e["pid"], e["tid"]}].push_back({e["ts"], e["dur"]});
    } else if (ph == "s" || ph == "t" || ph == "f") {
      flows[e["id"].get<uint64_t>()].push_back(e);
    } else if (ph != "i") {
      out.push_back("unexpected ph " + ph);
    }
  }
  for (const auto& [id, points] : flows) {
    int starts = 0, finishes = 0;
    double last = -1;
    for (const json& p : points) {
      starts += p["ph"] == "s";
      finishes += p["ph"] == "f";
      if (p["name"] != points[0]["name"] || p["cat"] != points[0]["cat"])
        out.push_back(fmt::format("flow {} changes name or category", id));
      if (p["ts"].get<double>() < last) out.push_back(fmt::format("flow {} goes back in time", id));
      last = p["ts"];
      const double ts = p["ts"];
      bool bound = false;
      for (const Span& s : slices[{p["pid"], p["tid"]}]) bound |= s.ts <= ts && ts <= s.ts + s.dur;
      if (!bound) out.push_back(fmt::format("flow {} point at {} binds to no op", id, ts));
    }
    if (starts != 1 || finishes != 1) {
      out.push_back(fmt::format("flow {} has {} start(s) and {} finish(es)", id, starts, finishes));
    }
    if (points.front()["ph"] != "s" || points.back()["ph"] != "f")
      out.push_back(fmt::format("flow {} does not run from its start to its finish", id));
  }
  return out;
}

inline json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

inline std::vector<json> events(const json& doc, const std::string& ph,
                                const std::string& cat = "") {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  }
  return out;
}

}  // namespace cprr::trace_test
