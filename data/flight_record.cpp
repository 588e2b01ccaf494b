#include "data/flight_record.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string_view>

#include "runtime/cpu_backend.h"
#include "runtime/error.h"
#include "runtime/fd.h"

namespace cprr {
namespace {

// Both processes map the file; the counters are atomics in shared memory, lock-free on every
// platform cprr builds for (checked below), so they work across processes.
struct FlightHeader {
  uint32_t magic;
  uint32_t version;
  std::atomic<uint64_t> execution;
  std::atomic<uint64_t> entered;  ///< collectives entered so far in `execution`
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

struct FlightEntry {
  uint64_t seq;
  uint64_t bytes;
  int32_t stream;
  int32_t root;
  /// The kind as the collective log names it, NUL-padded: a Python case's kinds are open-ended
  /// ("reduce_scatter", "all_reduce(product)"), so a name, not a code; longer ones are cut.
  char kind[32];
  uint8_t dtype;
  uint8_t op;
  uint8_t pad[2];
  uint32_t group;
  uint64_t members;
  int32_t peer;
  /// The caller's file:line, NUL-padded; the start is cut from a longer one (the line stays).
  char where[60];
  int64_t entered_ns;  ///< steady clock when the rank entered it
  uint32_t peers;      ///< how many of send_bytes / recv_bytes hold a peer's (0: none recorded)
  uint32_t pad2;
  uint64_t row_bytes;
  uint64_t send_bytes[kFlightPeers];
  uint64_t recv_bytes[kFlightPeers];
};
static_assert(sizeof(FlightEntry) == 416);

// The end of `text` in a NUL-padded field of `N` bytes: the last byte stays NUL.
template <std::size_t N>
void copy_tail(const std::string& text, char (&field)[N]) {
  const std::size_t n = std::min(text.size(), N - 1);
  text.copy(field, n, text.size() - n);
}

constexpr uint64_t kFileBytes = sizeof(FlightHeader) + kFlightSlots * sizeof(FlightEntry);

FlightHeader& header(const MappedRegion& m) { return *reinterpret_cast<FlightHeader*>(m.data()); }

FlightEntry* entries(const MappedRegion& m) {
  return reinterpret_cast<FlightEntry*>(m.data() + sizeof(FlightHeader));
}

}  // namespace

std::string flight_record_path(const std::string& dir, int rank) {
  return fmt::format("{}/flight-{}", dir, rank);
}

FlightRecorder::FlightRecorder(const std::string& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) throw_errno(__FILE__, __LINE__, fmt::format("open flight record {}", path));
  if (::ftruncate(fd.get(), static_cast<off_t>(kFileBytes)) != 0) {
    throw_errno(__FILE__, __LINE__, fmt::format("ftruncate flight record {}", path));
  }
  map_ = std::make_unique<MappedRegion>(fd.get(), kFileBytes);
  FlightHeader& h = header(*map_);
  h.magic = kFlightMagic;
  h.version = kFlightVersion;
  h.execution.store(0, std::memory_order_relaxed);
  h.entered.store(0, std::memory_order_release);
}

FlightRecorder::~FlightRecorder() = default;

void FlightRecorder::begin(uint64_t execution) {
  FlightHeader& h = header(*map_);
  h.entered.store(0, std::memory_order_relaxed);
  h.execution.store(execution, std::memory_order_release);
}

void FlightRecorder::enter(const CollectiveRecord& c) {
  FlightHeader& h = header(*map_);
  const uint64_t n = h.entered.load(std::memory_order_relaxed);
  FlightEntry& e = entries(*map_)[n % kFlightSlots];
  e = FlightEntry{c.seq,
                  c.bytes,
                  c.stream,
                  c.root,
                  {},
                  static_cast<uint8_t>(c.dtype),
                  static_cast<uint8_t>(c.op),
                  {},
                  c.group,
                  c.members,
                  c.peer,
                  {},
                  std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count()};
  c.kind.copy(e.kind, sizeof e.kind - 1);  // the last byte stays NUL
  copy_tail(c.where, e.where);
  const std::size_t peers = c.send_bytes.size();
  if (peers > 0 && peers <= kFlightPeers && c.recv_bytes.size() == peers) {
    e.peers = static_cast<uint32_t>(peers);
    e.row_bytes = c.row_bytes;
    std::copy(c.send_bytes.begin(), c.send_bytes.end(), e.send_bytes);
    std::copy(c.recv_bytes.begin(), c.recv_bytes.end(), e.recv_bytes);
  }
  // Published after the entry: a reader that sees the count sees the entry.
  h.entered.store(n + 1, std::memory_order_release);
}

std::optional<std::vector<CollectiveRecord>> read_flight_record(const std::string& path,
                                                                uint64_t execution) {
  std::optional<FlightLog> log = read_flight_log(path, execution);
  if (!log) return std::nullopt;
  return std::move(log->entered);
}

std::optional<FlightLog> read_flight_log(const std::string& path, uint64_t execution) {
  const UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || static_cast<uint64_t>(st.st_size) != kFileBytes) {
    return std::nullopt;
  }
  const MappedRegion map(fd.get(), kFileBytes);
  const FlightHeader& h = header(map);
  if (h.magic != kFlightMagic || h.version != kFlightVersion ||
      h.execution.load(std::memory_order_acquire) != execution) {
    return std::nullopt;
  }
  const uint64_t n = h.entered.load(std::memory_order_acquire);
  FlightLog out;
  // Once the ring is full, its oldest slot is the next one written: it may be mid-write.
  for (uint64_t i = n > kFlightSlots ? n - kFlightSlots + 1 : 0; i < n; ++i) {
    const FlightEntry& e = entries(map)[i % kFlightSlots];
    if (e.dtype > static_cast<uint8_t>(kLastDType) || e.op > static_cast<uint8_t>(ReduceOp::min)) {
      return std::nullopt;  // not written by FlightRecorder::enter
    }
    CollectiveRecord c;
    c.seq = e.seq;
    c.bytes = e.bytes;
    c.stream = e.stream;
    c.root = e.root;
    c.kind.assign(e.kind, ::strnlen(e.kind, sizeof e.kind));
    c.dtype = static_cast<DType>(e.dtype);
    c.op = static_cast<ReduceOp>(e.op);
    c.group = e.group;
    c.members = e.members;
    c.peer = e.peer;
    c.where.assign(e.where, ::strnlen(e.where, sizeof e.where));
    const std::size_t peers = std::min<std::size_t>(e.peers, kFlightPeers);
    c.send_bytes.assign(e.send_bytes, e.send_bytes + peers);
    c.recv_bytes.assign(e.recv_bytes, e.recv_bytes + peers);
    if (peers > 0) c.row_bytes = e.row_bytes;
    out.entered.push_back(std::move(c));
    out.entered_ns.push_back(e.entered_ns);
  }
  return out;
}

}  // namespace cprr
