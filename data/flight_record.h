#pragma once
// A rank's flight record: the fingerprint of every collective it enters, written into a small
// file in the world's directory *before* the backend sees the call. When the call then aborts the
// process (Gloo on a size mismatch) or never returns (NCCL waiting for bytes that never come),
// the rank reports nothing, but the controller still reads what each rank called and can name a
// collective mismatch instead of a bare crash or hang. PyTorch's Flight Recorder keeps the same
// kind of ring in memory and dumps it on a timeout; a shared file needs no dump step.
//
// The file is a versioned binary layout (FlightHeader, then kFlightSlots entries); the writer is
// the only process that maps it writable, the controller only reads it after the rank died or
// while it is stuck.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/capture.h"

namespace cprr {

class MappedRegion;

inline constexpr uint32_t kFlightMagic = 0x544c4643;  // "CFLT" read as little-endian bytes
/// Bump when FlightHeader or the entry layout changes (the reader ignores other versions).
/// 2: each entry holds when it was entered. 3: the kind by name (any kind a Python case's
/// collectives have), not as a code for the five C++ ones. 4: the group, its members, the peer
/// of a send or recv, the caller's line, an uneven all-to-all's bytes per peer.
inline constexpr uint32_t kFlightVersion = 4;
/// The ring keeps the last this many collectives of an execution.
inline constexpr uint64_t kFlightSlots = 1024;
/// An uneven all-to-all's bytes per peer are kept for groups of up to this many ranks (a larger
/// group's are compared once its ranks report).
inline constexpr std::size_t kFlightPeers = 16;

/// The flight record file of `rank` in the world directory `dir`.
std::string flight_record_path(const std::string& dir, int rank);

/// The rank side: owns the mapped file. Not thread-safe (the case body's thread calls it).
class FlightRecorder {
 public:
  /// Creates (or truncates) the file at `path`; throws cprr::Error naming it on failure.
  explicit FlightRecorder(const std::string& path);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  /// Starts the record of `execution`: what an earlier execution entered no longer counts.
  void begin(uint64_t execution);
  /// Records a collective or message about to be entered (its seq numbers it in its group or
  /// channel).
  void enter(const CollectiveRecord& c);

 private:
  std::unique_ptr<MappedRegion> map_;
};

/// A flight record as read: the collectives entered, oldest first, and when each was entered
/// (steady-clock nanoseconds, system-wide on Linux: comparable across a host's processes).
struct FlightLog {
  std::vector<CollectiveRecord> entered;
  std::vector<int64_t> entered_ns;

  bool operator==(const FlightLog&) const = default;
};

/// The collectives the record at `path` holds for `execution` (at most the last kFlightSlots - 1:
/// the oldest slot of a full ring may be mid-write);
/// nullopt when there is no such file, it is not a flight record of this version, or it records
/// another execution (the rank never started this one). Safe while the rank writes it.
std::optional<FlightLog> read_flight_log(const std::string& path, uint64_t execution);

/// read_flight_log's collectives alone.
std::optional<std::vector<CollectiveRecord>> read_flight_record(const std::string& path,
                                                                uint64_t execution);

}  // namespace cprr
