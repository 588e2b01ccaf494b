#include "recorder/api/launch_params.h"

#include <algorithm>
#include <cstring>

#include "runtime/error.h"

namespace cprr {

MemoryMap::MemoryMap(std::vector<KnownMemory> memory) {
  std::erase_if(memory, [](const KnownMemory& m) { return m.bytes == 0; });
  std::sort(memory.begin(), memory.end(), [](const KnownMemory& a, const KnownMemory& b) {
    return a.address != b.address ? a.address < b.address : a.bytes > b.bytes;
  });
  by_address_ = std::move(memory);
  max_end_.reserve(by_address_.size());
  uint64_t end = 0;
  for (const KnownMemory& m : by_address_) {
    end = std::max(end, m.address + m.bytes);
    max_end_.push_back(end);
  }
}

const KnownMemory* MemoryMap::find(uint64_t address) const {
  // The regions starting at or before `address`, latest first (and, starting together,
  // smallest first): the first holding it is the innermost. None before index i reaches it
  // once max_end_[i] <= address, so a pointer into no region costs no full scan.
  auto it = std::upper_bound(by_address_.begin(), by_address_.end(), address,
                             [](uint64_t a, const KnownMemory& m) { return a < m.address; });
  for (auto i = static_cast<std::size_t>(it - by_address_.begin()); i-- > 0;) {
    if (max_end_[i] <= address) return nullptr;
    const KnownMemory& m = by_address_[i];
    if (address < m.address + m.bytes) return &m;
  }
  return nullptr;
}

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

std::vector<PointedTouch> pointed_touches(const std::vector<KernelParam>& layout,
                                          std::span<const std::byte> values,
                                          const MemoryLookup& memory) {
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
