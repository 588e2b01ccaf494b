#include "python/native/rank_runtime.h"

#include <fmt/format.h>

#include <stdexcept>

#include "data/text_forms.h"
#include "python/native/case_registration.h"
#include "python/native/torch_allocator.h"
#include "python/native/unseen_work.h"
#include "recorder/api/case.h"
#include "recorder/api/context.h"
#include "recorder/api/library_hooks.h"
#include "recorder/launch/port_claim.h"
#include "recorder/protocol/protocol.h"
#include "recorder/rank/worker.h"
#include "runtime/dtype.h"

namespace cprr::python {
namespace {

DType dtype_of(const std::string& name) {
  const std::optional<DType> t = parse_dtype(name);
  if (!t) throw std::invalid_argument(fmt::format("cprr has no dtype '{}'", name));
  return *t;
}

MemPool pool_of(const std::string& name) {
  for (MemPool p : {MemPool::device, MemPool::symmetric, MemPool::host}) {
    if (mem_pool_name(p) == name) return p;
  }
  throw std::invalid_argument(
      fmt::format("cprr has no memory pool '{}' (device, symmetric or host)", name));
}

ReduceOp op_of(const std::string& name) {
  const std::optional<ReduceOp> op = parse_reduce_op(name);
  if (!op) throw std::invalid_argument(fmt::format("cprr has no reduction '{}'", name));
  return *op;
}

}  // namespace

int CaseContext::rank() const { return ctx_.rank(); }
int CaseContext::world_size() const { return ctx_.world_size(); }
uint64_t CaseContext::seed() const { return ctx_.seed(); }
uint64_t CaseContext::execution() const { return ctx_.execution(); }
const std::string& CaseContext::case_name() const { return ctx_.case_name(); }
std::map<std::string, std::string> CaseContext::params() const { return ctx_.params(); }
int CaseContext::device_index() const { return ctx_.device_index(); }
std::string CaseContext::backend() const { return std::string(ctx_.backend_name()); }
CollectiveTransport CaseContext::transport() const { return ctx_.transport(); }

void CaseContext::capture(bool is_output, const std::string& name, uint64_t address, uint64_t bytes,
                          const std::string& dtype, std::vector<int64_t> shape,
                          uint64_t native_stream, bool host) {
  const SeenScope own_work;  // the hash kernels are cprr's
  LibraryHooks(ctx_).capture_memory(is_output, name, reinterpret_cast<const std::byte*>(address),
                                    bytes, dtype_of(dtype), std::move(shape),
                                    reinterpret_cast<void*>(native_stream), host);
}

uint64_t CaseContext::enter_collective(const std::string& kind, const std::string& dtype,
                                       uint64_t bytes, int root, const std::string& op, int stream,
                                       uint32_t group, uint64_t members, const std::string& where,
                                       std::vector<uint64_t> send_bytes,
                                       std::vector<uint64_t> recv_bytes, uint64_t row_bytes) {
  CollectiveRecord c{0, kind, stream, dtype_of(dtype), bytes, root, op_of(op), group, members};
  c.where = where;
  c.send_bytes = std::move(send_bytes);
  c.recv_bytes = std::move(recv_bytes);
  c.row_bytes = row_bytes;
  return LibraryHooks(ctx_).enter_collective(std::move(c));
}

void CaseContext::complete_collective(uint64_t handle) {
  LibraryHooks(ctx_).complete_collective(handle);
}

void CaseContext::collective_raised(uint64_t handle) {
  LibraryHooks(ctx_).collective_raised(handle);
}

uint64_t CaseContext::enter_p2p(const std::string& kind, int peer, const std::string& dtype,
                                uint64_t bytes, uint32_t group, uint64_t members,
                                const std::string& where) {
  if (peer < 0) CPRR_THROW_AS(CaseFailure, "{} with peer {}: not a rank", kind, peer);
  CollectiveRecord c{0, kind, -1, dtype_of(dtype), bytes, -1, ReduceOp::sum, group, members, peer};
  c.where = where;
  return LibraryHooks(ctx_).enter_collective(std::move(c));
}

void CaseContext::note_group(uint32_t id, std::vector<int32_t> ranks, const std::string& backend,
                             const std::string& name) {
  LibraryHooks(ctx_).note_group(GroupRecord{id, std::move(ranks), backend, name});
}

namespace {

// The stream LibraryHooks enqueues a replay's delay on: none for CaseContext::kNoNativeStream (a
// stream the caller models with no native one behind it).
std::optional<void*> native_of(uint64_t native_stream) {
  if (native_stream == CaseContext::kNoNativeStream) return std::nullopt;
  return reinterpret_cast<void*>(native_stream);
}

}  // namespace

uint32_t CaseContext::track(const std::string& name, uint64_t address, uint64_t bytes, bool device,
                            uint64_t native_stream, int64_t written_by, int64_t symmetric_offset) {
  const SeenScope own_work;  // a replay's poison is cprr's
  return LibraryHooks(ctx_).track_memory(
      name, reinterpret_cast<std::byte*>(address), bytes, device,
      reinterpret_cast<void*>(native_stream), written_by,
      symmetric_offset < 0 ? std::nullopt
                           : std::optional<uint64_t>(static_cast<uint64_t>(symmetric_offset)));
}

void CaseContext::untrack(uint32_t buffer, int stream) {
  LibraryHooks(ctx_).untrack_memory(buffer, stream);
}

std::pair<uint64_t, bool> CaseContext::library_op(const std::string& kind, const std::string& name,
                                                  int stream, uint64_t native_stream,
                                                  const std::vector<Touch>& reads,
                                                  const std::vector<Touch>& writes, bool moves,
                                                  const std::vector<Touch>& touches) {
  const auto convert = [](const std::vector<Touch>& in) {
    std::vector<LibraryHooks::Touch> out;
    out.reserve(in.size());
    for (const auto& [buffer, offset, bytes] : in) {
      out.push_back(LibraryHooks::Touch{buffer, ByteSpan{offset, bytes}});
    }
    return out;
  };
  const SeenScope own_work;  // a replay's delay is cprr's
  const std::optional<void*> native = native_of(native_stream);
  const LibraryHooks::LibraryOp op = LibraryHooks(ctx_).library_op(
      kind, name, stream, native, convert(reads), convert(writes), moves, convert(touches));
  return {op.seq, op.sync_after};
}

std::pair<uint64_t, bool> CaseContext::library_launch(
    const std::string& name, int stream, uint64_t native_stream,
    const std::vector<std::pair<uint64_t, uint64_t>>& layout,
    const std::vector<std::byte>& values) {
  std::vector<KernelParam> params;
  params.reserve(layout.size());
  for (const auto& [offset, size] : layout) params.push_back(KernelParam{offset, size});
  const SeenScope own_work;  // a replay's delay is cprr's
  const std::optional<void*> native = native_of(native_stream);
  const LibraryHooks::LibraryOp op =
      LibraryHooks(ctx_).library_launch(name, stream, native, params, values);
  return {op.seq, op.sync_after};
}

std::optional<std::pair<uint64_t, bool>> CaseContext::library_copy(const std::string& name,
                                                                   int stream,
                                                                   uint64_t native_stream,
                                                                   uint64_t dst, uint64_t src,
                                                                   uint64_t bytes, bool is_set) {
  const SeenScope own_work;  // a replay's delay is cprr's
  const std::optional<void*> native = native_of(native_stream);
  const std::optional<LibraryHooks::LibraryOp> op =
      LibraryHooks(ctx_).library_copy(name, stream, native, dst, src, bytes, is_set);
  if (!op) return std::nullopt;
  return std::pair{op->seq, op->sync_after};
}

void CaseContext::graph_begin(int stream) { LibraryHooks(ctx_).begin_graph_capture(stream); }

uint32_t CaseContext::graph_end(int stream) { return LibraryHooks(ctx_).end_graph_capture(stream); }

std::optional<std::pair<uint64_t, bool>> CaseContext::graph_launch(uint32_t graph, int stream,
                                                                   uint64_t native_stream) {
  const SeenScope own_work;  // a replay's delays are cprr's
  const std::optional<LibraryHooks::LibraryOp> op =
      LibraryHooks(ctx_).launch_graph(graph, stream, native_of(native_stream));
  if (!op) return std::nullopt;
  return std::pair{op->seq, op->sync_after};
}

void CaseContext::library_order(const std::string& kind, const std::string& name, int stream,
                                int64_t event) {
  LibraryHooks(ctx_).library_order(kind, name, stream, event);
}

void CaseContext::synchronize_library() {
  const SeenScope own_work;
  LibraryHooks(ctx_).synchronize_library();
}

void CaseContext::hold_probe() { LibraryHooks(ctx_).hold_probe(); }

void CaseContext::release_probe() {
  const SeenScope own_work;  // the probe's sync and copies are cprr's
  LibraryHooks(ctx_).release_probe();
}

void CaseContext::distrust_transport(const std::string& why) {
  LibraryHooks(ctx_).distrust_transport(why);
}

void CaseContext::note_unseen(const std::string& what) { LibraryHooks(ctx_).library_unseen(what); }

std::vector<uint64_t> CaseContext::torch_released() {
  if (!torch_allocator_used()) return {};
  return LibraryHooks(ctx_).library_memory().take_released();
}

void CaseContext::torch_record_stream(uint64_t address, uint64_t native_stream) {
  if (!torch_allocator_used()) return;
  LibraryHooks(ctx_).library_memory().record_stream(reinterpret_cast<std::byte*>(address),
                                                    reinterpret_cast<void*>(native_stream));
}

Allocation CaseContext::alloc(const std::string& name, uint64_t bytes, const std::string& pool) {
  const MemPool p = pool_of(pool);
  const SeenScope own_work;  // a replay's poison is cprr's
  const Buffer b = ctx_.alloc(name, bytes, p);
  const Allocation a{b.id, reinterpret_cast<uint64_t>(b.ptr), b.bytes,
                     ctx_.backend_name() != "cpu" && p != MemPool::host};
  live_[b.id] = a;
  return a;
}

void CaseContext::free(uint32_t id) {
  auto it = live_.find(id);
  if (it == live_.end()) {
    throw std::invalid_argument(fmt::format("allocation {} is not live in this case", id));
  }
  // The pool is not needed to free: the Context knows each buffer's.
  ctx_.free(Buffer{id, reinterpret_cast<std::byte*>(it->second.address), it->second.bytes});
  live_.erase(it);
}

std::string expect_text(Expect e) { return std::string(expect_name(e)); }

Expect expect_of(const std::string& name) {
  if (const std::optional<Expect> e = parse_expect(name)) return *e;
  throw std::invalid_argument(
      fmt::format("expect='{}': use 'pass', 'fail', 'crash' or 'hang'", name));
}

void add_case(std::string name, CaseOptions options, Body body) {
  register_case(std::move(name), std::move(options), [body = std::move(body)](Context& ctx) {
    // torch's allocations during the case come from its arena (torch_allocator.h).
    if (torch_allocator_used()) LibraryHooks(ctx).library_memory().serve();
    CaseContext handle(ctx);
    const std::string failed = body(handle);
    if (!failed.empty()) throw CaseFailure(failed);
  });
}

void add_connected_hook(Connected hook) {
  registry().add_connected_hook([hook = std::move(hook)](const WorldJoined& joined) {
    return hook(joined.transport, joined.device_index);
  });
}

void add_error(std::string message) { registry().add_error(std::move(message)); }

void add_source_file(std::string path) { registry().add_source_file(std::move(path)); }

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const RegisteredCase& c : registry().cases()) names.push_back(c.info.name);
  return names;
}

int serve(const std::vector<std::string>& argv) {
  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (std::string& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  return worker_main(static_cast<int>(args.size()), raw.data());
}

uint32_t protocol_version() { return kProtocolVersion; }

int default_master_port() { return kDefaultMasterPort; }

const CaptureCalls& capture_calls() {
  static const CaptureCalls calls{
      [](CaseContext& c, const std::string& name, uint64_t address, uint64_t bytes, bool device,
         uint64_t native_stream, int64_t written_by, int64_t symmetric_offset) {
        return c.track(name, address, bytes, device, native_stream, written_by, symmetric_offset);
      },
      [](CaseContext& c, uint32_t buffer, int stream) { c.untrack(buffer, stream); },
      [](CaseContext& c, const std::string& kind, const std::string& name, int stream,
         uint64_t native_stream, const std::vector<CaseContext::Touch>& reads,
         const std::vector<CaseContext::Touch>& writes, bool moves) {
        return c.library_op(kind, name, stream, native_stream, reads, writes, moves);
      },
      [](CaseContext& c, const std::string& kind, const std::string& name, int stream,
         int64_t event) { c.library_order(kind, name, stream, event); },
      [](CaseContext& c) { c.synchronize_library(); },
      [](CaseContext& c) { return c.torch_released(); },
      [](CaseContext& c, uint64_t address, uint64_t native_stream) {
        c.torch_record_stream(address, native_stream);
      },
      &enter_seen,
      &leave_seen,
      &forgive_pending,
      [](CaseContext& c, const std::string& name, int stream, uint64_t native_stream,
         const std::vector<std::pair<uint64_t, uint64_t>>& layout,
         const std::vector<std::byte>& values) {
        return c.library_launch(name, stream, native_stream, layout, values);
      },
      [](CaseContext& c, const std::string& name, int stream, uint64_t native_stream, uint64_t dst,
         uint64_t src, uint64_t bytes, bool is_set) {
        return c.library_copy(name, stream, native_stream, dst, src, bytes, is_set);
      },
      &set_launch_hook};
  return calls;
}

}  // namespace cprr::python
