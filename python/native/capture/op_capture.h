#pragma once
// A case's torch ops in cprr's op log, captured in C++ from the dispatcher's RecordFunction
// callbacks: python/cprr/capture/op_capture.py's OpCapture, rule for rule, without a Python call
// per op. The Python dispatch mode sees each op that reaches torch's Python key,
// after autograd decomposed the composite ones, and none of the ops its kernel calls; so this
// capture takes the outermost op on the thread that is not CompositeImplicitAutograd, and
// ignores the ops nested in it. What each op reads, writes and makes comes from op_schema.h,
// the memory from tensor_table.h, the streams from stream_order.h; what it does is told to an
// OpSink.
#include <ATen/record_function.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "python/native/capture/op_schema.h"
#include "python/native/capture/op_sink.h"
#include "python/native/capture/outside.h"
#include "python/native/capture/stream_order.h"
#include "python/native/capture/tensor_table.h"

namespace cprr::python::capture {

/// Each op overload's Plan, worked out once per process (the capture of every case shares it).
/// Keyed by the address of the overload's schema name, which the dispatcher keeps for as long
/// as the op is registered, so a lookup costs no string (records that are no dispatcher op are
/// looked up each time: few are, and their names' addresses are not kept).
class PlanCache {
 public:
  struct Found {
    const Plan* plan = nullptr;  ///< nullptr: not a dispatcher op
    bool composite = false;      ///< decomposed by autograd: the Python mode never sees it
  };
  Found find(const at::RecordFunction& fn);

 private:
  struct Item {
    std::unique_ptr<Plan> plan;
    bool composite = false;
  };
  std::unordered_map<const char*, Item> items_;
};

/// What the capture keeps of an op between its start and its end.
struct OpInFlight : at::ObserverContext {
  const Plan* plan = nullptr;
  bool logged = false;
  uint64_t seq = 0;
  bool sync_after = false;
  bool copy = false;
  bool on_device = false;
  bool non_blocking = false;
  int stream = 0;
  uint64_t handle = 0;
  std::string where;
  std::vector<at::Tensor> every;
  const void* owner = nullptr;  ///< who started it (the bindings' Capture), for its end
};

class OpCapture {
 public:
  struct Options {
    bool device_backend = false;  ///< cuda: CPU tensors are the host's (stream -1)
    bool allocator = false;       ///< cprr's arena is torch's CUDA allocator (it reports frees)
    int device_index = -1;
  };
  OpCapture(OpSink& sink, PlanCache& plans, Options options, Where where, Place place);

  /// The dispatcher's start of an op at the thread's outermost level; nullptr: not the
  /// capture's (a composite op, or no dispatcher op).
  std::unique_ptr<OpInFlight> start(const at::RecordFunction& fn);
  /// The op's end (`op` from start).
  void end(const at::RecordFunction& fn, OpInFlight& op);

  /// The caching allocator took back memory at `address` of CUDA device `device_index`.
  void freed(int device_index, uint64_t address);
  /// At the case's end: what is still pending was outside the op log.
  void finish() { op_begins(nullptr); }
  /// A kernel seen only as its launch on `stream_handle` (a cudaStream_t), about to be issued:
  /// a `kernel` op named `name` at the case's line, its accesses inferred from its parameters.
  /// Returns whether a replay asks for a host sync once it is issued.
  bool launched(const std::string& name, uint64_t stream_handle,
                const std::vector<std::pair<uint64_t, uint64_t>>& layout,
                const std::vector<std::byte>& values);

  /// A copy (or, `is_set`, a memset) seen only as its API call `api` on `stream_handle`, about
  /// to be issued: a `copy` op with its exact extent. Returns launched()'s answer, or nullopt
  /// when it was not logged (it touches no tracked memory).
  std::optional<bool> copied(const std::string& api, uint64_t stream_handle, uint64_t dst,
                             uint64_t src, uint64_t bytes, bool is_set);

  TensorTable& tensors() { return tensors_; }
  StreamOrder& order() { return order_; }
  Outside& outside() { return outside_; }
  CaseMarks& marks() { return marks_; }
  OpSink& sink() { return sink_; }
  std::string where() const { return where_(); }

 private:
  void op_begins(const Plan* plan);
  void begin(const at::RecordFunction& fn, OpInFlight& op);
  void released();
  void record_stream(c10::ArrayRef<const c10::IValue> args);
  void lifted(const at::Tensor& t);
  void made(const OpInFlight& op, const std::vector<c10::IValue>& outputs);

  OpSink& sink_;
  PlanCache& plans_;
  Options options_;
  Where where_;
  StreamOrder order_;
  CaseMarks marks_;
  TensorTable tensors_;
  Outside outside_;
};

}  // namespace cprr::python::capture
