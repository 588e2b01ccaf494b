#pragma once
// Which tracked memory a kernel launch's parameters point into (issue 40 item 2). A kernel cprr
// sees only as a launch (a Triton kernel, an extension's, a raw cuLaunchKernel: CUPTI hands over
// its parameter buffer, cuFuncGetParamInfo each parameter's offset and size) says nothing of
// what it reads or writes; its pointers say where it may. Each 8-byte-aligned word of a
// parameter of 8 bytes or more (a pointer, or a struct of pointers as CUTLASS passes them) that
// lies in memory the case's logs name is an access of unknown direction to it: from the pointer
// to that memory's end (a pointer at its start: all of it). A value that merely equals an
// address is taken as a pointer: a race through it is a candidate, which replays confirm or drop.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "data/capture.h"

namespace cprr {

/// One parameter of a kernel, as cuFuncGetParamInfo gives it: where in the parameter buffer.
struct KernelParam {
  uint64_t offset = 0;
  uint64_t size = 0;
};

/// Memory the logs name: [address, address + bytes) is buffer `buffer`.
struct KnownMemory {
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint32_t buffer = 0;
};

/// An access of unknown direction: bytes of one buffer.
struct PointedTouch {
  uint32_t buffer = 0;
  ByteSpan span;
  bool operator==(const PointedTouch&) const = default;
};

/// Known memory, looked up by address. Regions may nest (a tensor inside an allocation); empty
/// ones are left out.
class MemoryMap {
 public:
  explicit MemoryMap(std::vector<KnownMemory> memory);
  /// The region holding `address`: of those that do, the one starting last (the innermost of
  /// nested ones; the smaller of two starting together). nullptr: none.
  const KnownMemory* find(uint64_t address) const;

 private:
  std::vector<KnownMemory> by_address_;  ///< by address, then by size descending
  std::vector<uint64_t> max_end_;        ///< the largest end among by_address_[0..i]
};

/// The accesses a launch's parameters imply (see the file's comment), one per buffer: the union
/// of its pointers' spans, in the order buffers are first pointed at. `values` is the parameter
/// buffer the layout describes; a parameter reaching past its end is refused (cprr::Error naming
/// the parameter and both sizes).
std::vector<PointedTouch> pointed_touches(const std::vector<KernelParam>& layout,
                                          std::span<const std::byte> values,
                                          const MemoryMap& memory);

}  // namespace cprr
