#pragma once
// A fixed-capacity tail of a byte stream (a rank's stdout or stderr): keeps the last `capacity`
// bytes and counts everything ever appended, so a case's share is "bytes since mark".
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace cprr {

class ByteRing {
 public:
  explicit ByteRing(std::size_t capacity) : buf_(capacity, '\0') {}

  void append(std::string_view bytes) {
    const std::size_t cap = buf_.size();
    if (cap == 0) {
      total_ += bytes.size();
      return;
    }
    if (bytes.size() > cap) {  // only the newest `cap` bytes can survive
      total_ += bytes.size() - cap;
      bytes = bytes.substr(bytes.size() - cap);
    }
    const std::size_t at = total_ % cap;
    const std::size_t first = std::min(bytes.size(), cap - at);
    std::memcpy(buf_.data() + at, bytes.data(), first);
    std::memcpy(buf_.data(), bytes.data() + first, bytes.size() - first);
    total_ += bytes.size();
  }
  /// Bytes appended since the ring was made (not capped).
  uint64_t total() const { return total_; }
  /// The bytes appended since `mark` (a previous total()), at most `capacity` of the newest.
  std::string since(uint64_t mark) const {
    const uint64_t kept = std::min<uint64_t>(total_ - std::min(mark, total_), buf_.size());
    std::string out;
    out.reserve(kept);
    for (uint64_t i = total_ - kept; i < total_; ++i) out.push_back(buf_[i % buf_.size()]);
    return out;
  }

 private:
  std::string buf_;
  uint64_t total_ = 0;
};

}  // namespace cprr
