#pragma once
// Comparing two executions' captures: the first divergence per rank, probes in order first (the
// first differing probe bounds the bug to the ops between two probes), then outputs (the first
// differing chunk names the bytes and elements). Used by cprecord's fresh-vs-pooled differential
// and by cpreplay.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/capture.h"

namespace cprr {

struct Divergence {
  int rank = 0;
  std::string kind;                       ///< probe | output | result
  std::string name;                       ///< capture name ("" for kind result)
  uint32_t seq = 0;                       ///< capture's position among its kind
  std::string reason;                     ///< hash | size | missing | extra | no result
  int64_t chunk = -1;                     ///< first differing 64 KiB chunk (-1 when not applicable)
  uint64_t byte_begin = 0, byte_end = 0;  ///< the chunk's byte range
  uint64_t elem_begin = 0, elem_end = 0;  ///< the same range in elements of dtype
  DType dtype = DType::u8;
  std::optional<uint64_t> element;  ///< first differing element when both raws are stored
  std::string expected, actual;     ///< that element's values (or hashes when no raw)
  /// Set by compare() (analysis/compare.h) when the two executions' collectives took different
  /// transports (ExecutionResult::collectives), e.g. "expected nccl, got gloo_staged": their
  /// outputs may differ by reduction order with no bug in the case. Empty within one transport.
  std::string transports;

  /// One line: "rank 1 output 'sum' #0: bytes [0, 4096) elements [0, 1024) of f32 differ; first
  /// at element 3: expected 4, got 5", followed by "; across transports (expected nccl, got
  /// gloo_staged): outputs may differ by reduction order" when `transports` is set.
  std::string describe() const;
};

/// Compares recorded (`expected`) and replayed (`actual`) captures rank by rank; a null pointer
/// means the rank produced no result. Returns the first divergence, or nullopt when they agree.
std::optional<Divergence> first_divergence(const std::vector<const CaseCapture*>& expected,
                                           const std::vector<const CaseCapture*>& actual);

}  // namespace cprr
