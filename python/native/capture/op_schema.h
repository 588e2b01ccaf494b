#pragma once
// What an aten op reads and writes, from its schema's alias info, worked out once per op
// overload: python/cprr/capture/op_schema.py in C++, rule for rule (the two are compared op for op
// by tests/python/test_native_capture.py). Every tensor argument that does not alias is read, every
// mutable one is written (and read too when the op is arithmetic), a return that aliases no
// argument is a tensor the op makes; the empty family, *_like / new_* and metadata queries read
// nothing.
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace cprr::python::capture {

/// An argument's role: a mask of kRead and kWrite (0: a tensor the op only aliases or looks at).
constexpr int kRead = 1;
constexpr int kWrite = 2;

/// What the capture needs of one op overload's schema.
struct Plan {
  explicit Plan(const c10::FunctionSchema& schema);

  std::string name;           ///< without "aten::" and the overload ("add_")
  bool aten = false;          ///< an aten op (others are not logged: c10d's, a library's)
  std::vector<int> roles;     ///< per argument (boxed: kwarg-only ones included)
  std::vector<bool> returns;  ///< per return: a tensor the op makes
  bool makes = false;         ///< any return is
  bool copy = false;          ///< may move bytes between host and device
  bool may_move = false;      ///< may only move bytes (moves_bytes decides per call)
  bool empty = false;         ///< of the empty family: what it makes nobody wrote
  bool lifts = false;         ///< torch.tensor(data)'s lift
  bool record_stream = false;
  bool item = false;  ///< _local_scalar_dense (.item())
  /// Done by its autograd kernel alone (detach_ only changes autograd's metadata), so it never
  /// reaches torch's Python key: the dispatch mode never sees it.
  bool autograd_only = false;
  int non_blocking = -1;   ///< the argument "non_blocking", if any
  int device = -1;         ///< the argument "device", if any
  int memory_format = -1;  ///< the argument "memory_format", if any
  int dim = -1;            ///< cat's "dim"
};

/// The tensors an op's arguments give it.
struct Accesses {
  Accesses(const Plan& plan, c10::ArrayRef<const c10::IValue> args);
  std::vector<at::Tensor> reads, writes, every;

 private:
  /// An op of the GPU reads its 0-dim CPU tensors on the host as it is issued: not reads.
  void drop_host_scalars(const Plan& plan, c10::ArrayRef<const c10::IValue> args);
};

/// The tensors in a value: itself, or those of a list or tuple.
void tensors_of(const c10::IValue& value, std::vector<at::Tensor>& out);

/// The CUDA device an op runs on (its first CUDA tensor's, else its device argument's), or
/// nullopt for an op of the host.
std::optional<c10::Device> device_of(const Plan& plan, const std::vector<at::Tensor>& every,
                                     c10::ArrayRef<const c10::IValue> args);
/// Whether this call only moves bytes (OpRecord::moves; _op_schema.moves_bytes).
bool moves_bytes(const Plan& plan, const Accesses& access, c10::ArrayRef<const c10::IValue> args);
/// Whether the op moves bytes between host and device memory.
bool crosses(const Plan& plan, const std::vector<at::Tensor>& every,
             c10::ArrayRef<const c10::IValue> args);
/// Whether this call is non_blocking.
bool non_blocking(const Plan& plan, c10::ArrayRef<const c10::IValue> args);

}  // namespace cprr::python::capture
