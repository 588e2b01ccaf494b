#include "python/native/capture/op_capture.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>

#ifdef CPRR_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace cprr::python::capture {
namespace {

/// Whether autograd decomposes the op before it reaches torch's Python key (so the dispatch
/// mode sees its parts, never itself): a CompositeImplicitAutograd kernel, which the dispatcher
/// prefers for autograd when the op has no kernel of the backend's or an explicit composite
/// one (OperatorEntry::computeDispatchTableEntry).
bool decomposed(const c10::OperatorName& name) {
  const auto op = c10::Dispatcher::singleton().findOp(name);
  if (!op) return false;
  using K = c10::DispatchKey;
  if (!op->hasKernelForDispatchKey(K::CompositeImplicitAutograd)) return false;
  for (K k : {K::CPU, K::CUDA, K::CompositeExplicitAutograd, K::AutogradCPU, K::AutogradCUDA}) {
    if (op->hasKernelForDispatchKey(k)) return false;
  }
  return true;
}

}  // namespace

PlanCache::Found PlanCache::find(const at::RecordFunction& fn) {
  const char* key = fn.name();
  auto it = items_.find(key);
  if (it == items_.end()) {
    // Only dispatcher ops are kept: a record named by a string of its own (not a schema's)
    // may free it, and a schema registered later could get its address.
    const auto schema = fn.operator_schema();
    if (!schema) return {};
    Item item;
    item.plan = std::make_unique<Plan>(*schema);
    item.composite = decomposed(schema->operator_name()) || item.plan->autograd_only;
    it = items_.emplace(key, std::move(item)).first;
  }
  return {it->second.plan.get(), it->second.composite};
}

OpCapture::OpCapture(OpSink& sink, PlanCache& plans, Options options, Where where, Place place)
    : sink_(sink),
      plans_(plans),
      options_(options),
      where_(std::move(where)),
      order_(sink, options.device_backend ? -1 : 0),
      marks_(sink, std::move(place)),
      tensors_(sink, order_, marks_, [this] { return where_(); }),
      outside_(sink) {}

void OpCapture::op_begins(const Plan* plan) {
  if (options_.allocator) released();
  outside_.settle(plan != nullptr && plan->lifts);
}

bool OpCapture::launched(const std::string& name, uint64_t stream_handle,
                         const std::vector<std::pair<uint64_t, uint64_t>>& layout,
                         const std::vector<std::byte>& values) {
  op_begins(nullptr);  // frees before it are in the allocation log first
  return sink_
      .library_launch(name + " at " + where_(), order_.numbers().stream(stream_handle),
                      stream_handle, layout, values)
      .second;
}

std::optional<bool> OpCapture::copied(const std::string& api, uint64_t stream_handle, uint64_t dst,
                                      uint64_t src, uint64_t bytes, bool is_set) {
  op_begins(nullptr);
  const auto op =
      sink_.library_copy(api + " at " + where_(), order_.numbers().stream(stream_handle),
                         stream_handle, dst, src, bytes, is_set);
  if (!op) return std::nullopt;
  return op->second;
}

void OpCapture::released() {
  for (uint64_t address : sink_.torch_released()) freed(options_.device_index, address);
}

void OpCapture::freed(int device_index, uint64_t address) {
  tensors_.forget(TensorKey{static_cast<int8_t>(c10::DeviceType::CUDA),
                            static_cast<int8_t>(device_index), address},
                  true);
}

std::unique_ptr<OpInFlight> OpCapture::start(const at::RecordFunction& fn) {
  // What torch runs with its Python key excluded (torch.tensor's own empty, before its lift)
  // never reaches the dispatch mode: past the dispatcher for the capture too.
  if (c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::Python)) return nullptr;
  const PlanCache::Found found = plans_.find(fn);
  if (found.plan == nullptr || found.composite) return nullptr;
  auto op = std::make_unique<OpInFlight>();
  op->plan = found.plan;
  op_begins(found.plan->aten ? found.plan : nullptr);
  // Not aten (c10d's: python/cprr/distributed/collectives.py logs it), or an op the log needs no
  // entry for: its CUDA work and memory are still not work outside the op log.
  if (found.plan->aten) begin(fn, *op);
  outside_.enter();
  return op;
}

void OpCapture::begin(const at::RecordFunction& fn, OpInFlight& op) {
  const Plan& plan = *op.plan;
  const c10::ArrayRef<const c10::IValue> args = fn.inputs();
  if (plan.record_stream) {
    record_stream(args);
    return;
  }
  if (plan.lifts && !args.empty() && args[0].isTensor()) lifted(args[0].toTensor());
  Accesses access(plan, args);
  std::vector<Touch> reads = tensors_.touches(access.reads);
  std::vector<Touch> writes = tensors_.touches(access.writes);
  if (reads.empty() && writes.empty() && !plan.makes) return;
  const std::optional<c10::Device> device = device_of(plan, access.every, args);
  std::tie(op.stream, op.handle) = order_.stream_of(device);
  op.copy = op.stream >= 0 && plan.copy && crosses(plan, access.every, args);
  op.on_device = device.has_value();
  op.non_blocking = non_blocking(plan, args);
  const char* kind = op.copy ? "copy" : (op.stream < 0 ? "host" : "kernel");
  op.where = where_();
  std::tie(op.seq, op.sync_after) =
      sink_.library_op(kind, "aten." + plan.name + " at " + op.where, op.stream, op.handle, reads,
                       writes, moves_bytes(plan, access, args));
  op.logged = true;
  op.every = std::move(access.every);
}

void OpCapture::end(const at::RecordFunction& fn, OpInFlight& op) {
  outside_.leave();
  if (!op.logged) return;
  const Plan& plan = *op.plan;
  const std::vector<c10::IValue>& outputs = fn.outputs();
  // An op that threw returns nothing: the Python capture logs nothing after it either.
  if (outputs.size() < plan.returns.size()) return;
  if (plan.makes) made(op, outputs);
  if (op.copy && op.non_blocking) {
    for (const at::Tensor& t : op.every) {
      if (t.device().is_cpu() && t.is_pinned()) order_.pinned_used(key_of(t), op.stream);
    }
  } else if (op.copy || (op.on_device && plan.item)) {
    // A blocking copy between host and device, and .item(), return once it is done.
    order_.order("sync", "aten." + plan.name + " waits for its stream", op.stream);
  }
  if (op.sync_after) sink_.synchronize_library();
}

void OpCapture::made(const OpInFlight& op, const std::vector<c10::IValue>& outputs) {
  const Plan& plan = *op.plan;
  std::vector<TensorKey> inputs;
  for (const at::Tensor& t : op.every) {
    if (t.defined() && t.has_storage()) inputs.push_back(key_of(t));
  }
  for (size_t r = 0; r < plan.returns.size() && r < outputs.size(); ++r) {
    if (!plan.returns[r]) continue;
    std::vector<at::Tensor> ts;
    tensors_of(outputs[r], ts);
    for (const at::Tensor& t : ts) {
      if (!t.defined() || !trackable(t)) continue;
      const TensorKey key = key_of(t);
      if (std::find(inputs.begin(), inputs.end(), key) != inputs.end()) continue;
      int64_t written_by = plan.empty ? -1 : static_cast<int64_t>(op.seq);
      // Host memory handed out again only after the async calls that held it (the op was
      // logged before its result's address was known), or pinned memory only after the copies
      // that used it: written after those waits, not by the op logged before them.
      const bool held = !t.is_cuda() && tensors_.host_reused(key) && op.stream == order_.host();
      const bool pinned = op.stream < 0 && order_.pinned_reused(key);
      if ((held || pinned) && written_by >= 0) {
        written_by = static_cast<int64_t>(
            sink_
                .library_op("host",
                            "aten." + plan.name + " at " + op.where + " (writes the memory reused)",
                            order_.host(), 0, {}, {}, false)
                .first);
      }
      tensors_.track_made(t, key, "torch." + plan.name + shape_text(t) + " at " + op.where,
                          op.handle, written_by, op.stream);
    }
  }
}

void OpCapture::record_stream(c10::ArrayRef<const c10::IValue> args) {
  if (args.size() < 2 || !args[0].isTensor()) return;
  const at::Tensor& t = args[0].toTensor();
  if (!t.is_cuda()) return;
#ifdef CPRR_TORCH_CUDA
  const auto handle =
      reinterpret_cast<uint64_t>(c10::cuda::CUDAStream(args[1].toStream()).stream());
  const TensorKey key = key_of(t);
  if (options_.allocator) sink_.torch_record_stream(key.base, handle);
  if (Entry* entry = tensors_.get(key)) entry->used_on(order_.numbers().stream(handle));
#endif
}

void OpCapture::lifted(const at::Tensor& t) {
  if (!trackable(t)) return;
  const TensorKey key = key_of(t);
  if (!t.is_cuda()) tensors_.host_reused(key);
  tensors_.forget(key);
  const std::string what = "torch.tensor" + shape_text(t) + " at " + where_();
  const uint64_t size = storage_bytes(t);
  uint64_t seq = 0;
  if (t.is_cuda()) {
    // Its data was copied on the current stream, and the host waited for the copy.
    const auto [stream, handle] = order_.stream_of(t);
    seq = sink_.library_op("copy", what, stream, handle, {}, {}, false).first;
    order_.order("sync", "torch.tensor waits for its copy", stream);
  } else {
    seq = sink_.library_op("host", what, order_.host(), 0, {}, {}, false).first;
  }
  tensors_.track_found(t, key, what, size, static_cast<int64_t>(seq));
}

}  // namespace cprr::python::capture
