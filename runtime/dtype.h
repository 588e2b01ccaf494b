#pragma once
// Element types and reduction operators shared by buffers, collectives, outputs and logs.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cprr {

/// Element type of a buffer region; the wire and database store the enumerator's name. The last
/// four came with Python cases (a torch tensor's dtype travels with its capture and collective):
/// cprr's own collectives and kernels use the first five.
enum class DType : uint8_t { u8, i32, i64, f32, f64, i8, i16, f16, bf16 };

/// The last enumerator: what a decoder range-checks against.
inline constexpr DType kLastDType = DType::bf16;

/// Reduction applied by all_reduce.
enum class ReduceOp : uint8_t { sum, max, min };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::u8:
    case DType::i8:
      return 1;
    case DType::i16:
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::f32:
      return 4;
    case DType::i64:
      return 8;
    case DType::f64:
      return 8;
  }
  return 1;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::u8:
      return "u8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i8:
      return "i8";
    case DType::i16:
      return "i16";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

/// Parses a dtype name ("f32", ...); nullopt when unknown.
constexpr std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::u8, DType::i32, DType::i64, DType::f32, DType::f64, DType::i8, DType::i16,
                  DType::f16, DType::bf16}) {
    if (dtype_name(t) == s) return t;
  }
  return std::nullopt;
}

constexpr std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "?";
}

/// Parses a reduce-op name ("sum", ...); nullopt when unknown.
constexpr std::optional<ReduceOp> parse_reduce_op(std::string_view s) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    if (reduce_op_name(op) == s) return op;
  }
  return std::nullopt;
}

}  // namespace cprr
