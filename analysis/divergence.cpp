#include "analysis/divergence.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/hash.h"

namespace cprr {
namespace {

// A 16-bit float's value as a float: IEEE half, or bfloat16 (a float's upper half).
float half_value(uint16_t h, bool brain) {
  if (brain) {
    const uint32_t bits = uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(mant), -24);  // subnormal
  } else if (exp == 31) {
    mag = mant == 0 ? std::numeric_limits<float>::infinity()
                    : std::numeric_limits<float>::quiet_NaN();
  } else {
    mag = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign != 0 ? -mag : mag;
}

std::string value_at(const std::string& raw, DType t, uint64_t i) {
  const char* p = raw.data() + i * dtype_size(t);
  auto read = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (t) {
    case DType::u8:
      return fmt::format("{}", read(uint8_t{}));
    case DType::i32:
      return fmt::format("{}", read(int32_t{}));
    case DType::i64:
      return fmt::format("{}", read(int64_t{}));
    case DType::f32:
      return fmt::format("{}", read(float{}));
    case DType::f64:
      return fmt::format("{}", read(double{}));
    case DType::i8:
      return fmt::format("{}", read(int8_t{}));
    case DType::i16:
      return fmt::format("{}", read(int16_t{}));
    case DType::f16:
      return fmt::format("{}", half_value(read(uint16_t{}), false));
    case DType::bf16:
      return fmt::format("{}", half_value(read(uint16_t{}), true));
  }
  return "?";
}

// Fills chunk, byte and element ranges (and values when both raws exist) of a hash mismatch.
void locate(const Capture& e, const Capture& a, Divergence& d) {
  const std::size_t k = std::min(e.digest.chunks.size(), a.digest.chunks.size());
  std::size_t i = 0;
  while (i < k && e.digest.chunks[i] == a.digest.chunks[i]) ++i;
  d.chunk = static_cast<int64_t>(i);
  d.byte_begin = i * kHashChunkBytes;
  d.byte_end = std::min<uint64_t>((i + 1) * kHashChunkBytes, e.bytes);
  const uint64_t elem = dtype_size(e.dtype);
  d.elem_begin = d.byte_begin / elem;
  d.elem_end = (d.byte_end + elem - 1) / elem;
  d.expected = fmt::format("{:016x}", e.digest.whole);
  d.actual = fmt::format("{:016x}", a.digest.whole);
  if (e.raw.size() != e.bytes || a.raw.size() != a.bytes || e.bytes == 0) return;
  for (uint64_t x = d.elem_begin; x < d.elem_end; ++x) {
    if (std::memcmp(e.raw.data() + x * elem, a.raw.data() + x * elem, elem) != 0) {
      d.element = x;
      d.expected = value_at(e.raw, e.dtype, x);
      d.actual = value_at(a.raw, a.dtype, x);
      return;
    }
  }
}

std::optional<Divergence> compare_list(int rank, const char* kind, const std::vector<Capture>& exp,
                                       const std::vector<Capture>& act) {
  for (std::size_t i = 0; i < std::max(exp.size(), act.size()); ++i) {
    Divergence d;
    d.rank = rank;
    d.kind = kind;
    d.seq = static_cast<uint32_t>(i);
    if (i >= act.size() || i >= exp.size()) {
      d.reason = i >= act.size() ? "missing" : "extra";
      d.name = i < exp.size() ? exp[i].name : act[i].name;
      return d;
    }
    const Capture& e = exp[i];
    const Capture& a = act[i];
    d.name = e.name;
    d.dtype = e.dtype;
    if (e.name != a.name || e.bytes != a.bytes) {
      d.reason = "size";
      d.expected = fmt::format("{} ({} bytes)", e.name, e.bytes);
      d.actual = fmt::format("{} ({} bytes)", a.name, a.bytes);
      return d;
    }
    if (e.digest.whole != a.digest.whole) {
      d.reason = "hash";
      locate(e, a, d);
      return d;
    }
  }
  return std::nullopt;
}

// Divergence::describe without the transports: where and how the captures differ.
std::string describe_difference(const Divergence& d) {
  if (d.reason == "no result") return fmt::format("rank {}: {}", d.rank, d.expected);
  std::string head = fmt::format("rank {} {} '{}' #{}", d.rank, d.kind, d.name, d.seq);
  if (d.reason != "hash") {
    return fmt::format("{}: {} (expected {}, got {})", head, d.reason,
                       d.expected.empty() ? "-" : d.expected, d.actual.empty() ? "-" : d.actual);
  }
  std::string out =
      fmt::format("{}: bytes [{}, {}) elements [{}, {}) of {} differ (chunk {})", head,
                  d.byte_begin, d.byte_end, d.elem_begin, d.elem_end, dtype_name(d.dtype), d.chunk);
  if (d.element) {
    out +=
        fmt::format("; first at element {}: expected {}, got {}", *d.element, d.expected, d.actual);
  } else {
    out += fmt::format("; hash expected {}, got {}", d.expected, d.actual);
  }
  return out;
}

}  // namespace

std::string Divergence::describe() const {
  if (transports.empty()) return describe_difference(*this);
  return fmt::format("{}; across transports ({}): outputs may differ by reduction order",
                     describe_difference(*this), transports);
}

std::optional<Divergence> first_divergence(const std::vector<const CaseCapture*>& expected,
                                           const std::vector<const CaseCapture*>& actual) {
  for (std::size_t r = 0; r < std::max(expected.size(), actual.size()); ++r) {
    const CaseCapture* e = r < expected.size() ? expected[r] : nullptr;
    const CaseCapture* a = r < actual.size() ? actual[r] : nullptr;
    if (e == nullptr && a == nullptr) continue;
    if (e == nullptr || a == nullptr) {
      Divergence d;
      d.rank = static_cast<int>(r);
      d.kind = "result";
      d.reason = "no result";
      d.expected = e == nullptr ? "no result in the record" : "no result in the replay";
      return d;
    }
    const int rank = static_cast<int>(r);
    if (auto d = compare_list(rank, "probe", e->probes, a->probes)) return d;
    if (auto d = compare_list(rank, "output", e->outputs, a->outputs)) return d;
  }
  return std::nullopt;
}

}  // namespace cprr
