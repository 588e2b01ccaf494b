#pragma once
// The case's tensor memory as its op log knows it: python/cprr/capture/tensor_table.py (and
// python/cprr/capture/symmetric.py's CaseMarks) in C++, which say why. Every tensor storage the
// case makes or touches is one entry, a buffer of the allocation log keyed by its device and
// address, so the race check sees memory freed and reused as the same bytes.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "python/native/capture/op_sink.h"
#include "python/native/capture/stream_order.h"
#include "python/native/capture/tensor_key.h"

namespace cprr::python::capture {

/// Where in the case's code the current call was made ("file.py:12"); asked only when a name
/// needs it.
using Where = std::function<std::string()>;
/// The place of an address in the rank's symmetric windows (python/cprr/capture/symmetric.py's
/// SymmetricSpace.place), or nullopt.
using Place = std::function<std::optional<int64_t>(uint64_t address)>;

/// A tracked tensor memory: its buffer, the stream that made it, the other streams
/// record_stream said use it, and its bytes (nullopt: a device tensor's, whose free is seen).
struct Entry {
  uint32_t buffer = 0;
  int stream = 0;
  std::set<int> uses;
  std::optional<uint64_t> size;
  void used_on(int s) {
    if (s != stream) uses.insert(s);
  }
};

/// One case's memory in the rank's symmetric windows (see python/cprr/capture/symmetric.py's
/// CaseMarks).
class CaseMarks {
 public:
  CaseMarks(OpSink& sink, Place place) : sink_(sink), place_(std::move(place)) {}
  std::optional<int64_t> placed(const TensorKey& key);
  std::optional<uint32_t> pop(const TensorKey& key);
  /// symm_mem.rendezvous registered the window memory at `key` is in, at `place`.
  void registered(const at::Tensor& t, const TensorKey& key, int64_t place, int host,
                  const std::string& where);

 private:
  OpSink& sink_;
  Place place_;
  // memory logged as symmetric -> the buffer of its mark, or nullopt where its entry is placed
  std::unordered_map<TensorKey, std::optional<uint32_t>, TensorKeyHash> marks_;
};

class TensorTable {
 public:
  TensorTable(OpSink& sink, StreamOrder& order, CaseMarks& marks, Where where)
      : sink_(sink), order_(order), marks_(marks), where_(std::move(where)) {}

  Entry* get(const TensorKey& key);
  /// (buffer, byte offset, bytes) of each contiguous run of each tensor (runs), a tensor never
  /// seen before included.
  std::vector<Touch> touches(const std::vector<at::Tensor>& tensors);
  /// Tracks memory made past the dispatcher, whole, as written by op `seq`.
  Entry& track_found(const at::Tensor& t, const TensorKey& key, const std::string& what,
                     uint64_t size, int64_t seq);
  /// Tracks a tensor an op made on `stream` (cudaStream_t `handle`), written by op
  /// `written_by` (-1: nobody).
  void track_made(const at::Tensor& t, const TensorKey& key, const std::string& label,
                  uint64_t handle, int64_t written_by, int stream);
  /// A tensor made past the dispatcher that nothing wrote (symm_mem.empty's).
  void track_unwritten(const at::Tensor& t, const std::string& label);
  /// `tensor` is over cprr's allocation `buffer` (ctx.symmetric_empty).
  void adopt(const at::Tensor& t, uint32_t buffer);
  /// `stream` uses these tensors as record_stream would say (an async collective's). A host
  /// tensor's memory is held by the call's Work until the call is done, so it too comes back
  /// only after its uses (host_reused).
  void used_by(const std::vector<at::Tensor>& tensors, int stream);
  /// Host memory tracked at `key` is handed out again (its free is not seen): the async calls
  /// that used it held it until done, so the reuse comes after them: logged now, before what
  /// the new tensor's maker writes. Returns whether it logged a wait.
  bool host_reused(const TensorKey& key);
  /// The memory at `key` went back to its allocator (`reused`: the caching allocator's).
  void forget(const TensorKey& key, bool reused = false);

 private:
  Entry& found(const at::Tensor& t, const TensorKey& key);

  OpSink& sink_;
  StreamOrder& order_;
  CaseMarks& marks_;
  Where where_;
  std::unordered_map<TensorKey, Entry, TensorKeyHash> entries_;
};

/// "(2, 3)", "(4,)", "()": a shape as Python prints a tuple, for the names the Python capture
/// gives (the two captures name ops alike).
std::string shape_text(const at::Tensor& t);

}  // namespace cprr::python::capture
