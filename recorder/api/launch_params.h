#pragma once
// Which tracked memory a kernel launch's parameters point into. A kernel cprr
// sees only as a launch (a Triton kernel, an extension's, a raw cuLaunchKernel: CUPTI hands over
// its parameter buffer, cuFuncGetParamInfo each parameter's offset and size) says nothing of
// what it reads or writes; its pointers say where it may. Each 8-byte-aligned word of a
// parameter of 8 bytes or more (a pointer, or a struct of pointers as CUTLASS passes them) that
// lies in memory the case's logs name is an access of unknown direction to it: from the pointer
// to that memory's end (a pointer at its start: all of it). A value that merely equals an
// address is taken as a pointer: a race through it is a candidate, which replays confirm or drop.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
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

/// Regions that come and go without overlapping (a case's tracked tensors, each at an address
/// of its own), kept by address as they are added and removed: a launch's lookups cost log n
/// each, not a pass over the allocation log. A region added at a live one's address replaces it
/// (host memory's frees are seen only when the address is taken again). find() looks in the
/// region starting last at or before the address only.
class LiveMemory {
 public:
  void add(const KnownMemory& m);
  void remove(uint32_t buffer);
  /// The region holding `address`; nullptr: none.
  const KnownMemory* find(uint64_t address) const;
  /// The regions [address, address + bytes) overlaps, by address.
  std::vector<KnownMemory> overlapping(uint64_t address, uint64_t bytes) const;

 private:
  std::map<uint64_t, KnownMemory> by_address_;
  std::unordered_map<uint32_t, uint64_t> address_of_;  ///< buffer -> its address
};

/// The accesses a launch's parameters imply (see the file's comment), one per buffer: the union
/// of its pointers' spans, in the order buffers are first pointed at. `values` is the parameter
/// buffer the layout describes; a parameter reaching past its end is refused (cprr::Error naming
/// the parameter and both sizes).
std::vector<PointedTouch> pointed_touches(const std::vector<KernelParam>& layout,
                                          std::span<const std::byte> values,
                                          const LiveMemory& memory);

/// The bytes [address, address + bytes) a copy or memset reads or writes, as spans of the regions
/// they fall in, by address (exact: unlike a pointer parameter, a copy names its extent); bytes
/// in no region are named by none.
std::vector<PointedTouch> range_touches(uint64_t address, uint64_t bytes, const LiveMemory& memory);

}  // namespace cprr
