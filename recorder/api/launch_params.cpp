#include "recorder/api/launch_params.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "runtime/error.h"

namespace cprr {

void LiveMemory::add(const KnownMemory& m) {
  if (m.bytes == 0) return;
  if (auto it = by_address_.find(m.address); it != by_address_.end()) {
    address_of_.erase(it->second.buffer);
  }
  by_address_[m.address] = m;
  address_of_[m.buffer] = m.address;
}

void LiveMemory::remove(uint32_t buffer) {
  auto it = address_of_.find(buffer);
  if (it == address_of_.end()) return;
  by_address_.erase(it->second);
  address_of_.erase(it);
}

const KnownMemory* LiveMemory::find(uint64_t address) const {
  auto it = by_address_.upper_bound(address);
  if (it == by_address_.begin()) return nullptr;
  --it;
  return address < it->second.address + it->second.bytes ? &it->second : nullptr;
}

std::vector<KnownMemory> LiveMemory::overlapping(uint64_t address, uint64_t bytes) const {
  std::vector<KnownMemory> out;
  if (bytes == 0) return out;
  const uint64_t end = address + bytes < address ? UINT64_MAX : address + bytes;
  auto it = by_address_.upper_bound(address);
  if (it != by_address_.begin() &&
      std::prev(it)->second.address + std::prev(it)->second.bytes > address) {
    --it;  // the region that starts before `address` and reaches into it
  }
  for (; it != by_address_.end() && it->first < end; ++it) out.push_back(it->second);
  return out;
}

std::vector<PointedTouch> range_touches(uint64_t address, uint64_t bytes,
                                        const LiveMemory& memory) {
  std::vector<PointedTouch> out;
  const uint64_t end = address + bytes < address ? UINT64_MAX : address + bytes;
  for (const KnownMemory& m : memory.overlapping(address, bytes)) {
    const uint64_t begin = std::max(address, m.address);
    const uint64_t stop = std::min(end, m.address + m.bytes);
    out.push_back(PointedTouch{m.buffer, ByteSpan{begin - m.address, stop - begin}});
  }
  return out;
}

std::vector<PointedTouch> pointed_touches(const std::vector<KernelParam>& layout,
                                          std::span<const std::byte> values,
                                          const LiveMemory& memory) {
  std::vector<PointedTouch> out;
  for (std::size_t p = 0; p < layout.size(); ++p) {
    const KernelParam& param = layout[p];
    if (param.offset > values.size() || param.size > values.size() - param.offset) {
      CPRR_THROW(
          "kernel parameter {} at offset {} ({} bytes) reaches past the {}-byte parameter "
          "buffer",
          p, param.offset, param.size, values.size());
    }
    if (param.size < 8) continue;  // too small to hold an address
    for (uint64_t at = (param.offset + 7) / 8 * 8; at + 8 <= param.offset + param.size; at += 8) {
      uint64_t pointer = 0;
      std::memcpy(&pointer, values.data() + at, sizeof pointer);
      const KnownMemory* m = memory.find(pointer);
      if (m == nullptr) continue;
      const uint64_t begin = pointer - m->address;
      const ByteSpan span{begin, m->bytes - begin};
      auto same = std::find_if(out.begin(), out.end(),
                               [&](const PointedTouch& t) { return t.buffer == m->buffer; });
      if (same == out.end()) {
        out.push_back(PointedTouch{m->buffer, span});
      } else if (span.offset < same->span.offset) {
        same->span = ByteSpan{span.offset, same->span.offset + same->span.bytes - span.offset};
      }
    }
  }
  return out;
}

}  // namespace cprr
