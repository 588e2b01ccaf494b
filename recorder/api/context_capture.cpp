// Context: collectives (logged with their fingerprints, entered in the flight record) and captures
// (probe/output: hashed on the device or the host, sent with the case's result).
#include <charconv>
#include <cstring>
#include <numeric>

#include "kernels/hash.h"
#include "kernels/poison.h"
#include "recorder/api/context.h"
#if CPRR_HAVE_CUDA
#include "kernels/device_hash.h"
#endif

namespace cprr {
namespace {

uint64_t elements(const Buffer& b, DType dtype, const char* what) {
  const uint64_t elem = dtype_size(dtype);
  if (b.bytes % elem != 0) {
    CPRR_THROW_AS(CaseFailure, "{}: buffer {} has {} bytes, not a multiple of {} ({})", what, b.id,
                  b.bytes, elem, dtype_name(dtype));
  }
  return b.bytes / elem;
}

int64_t total(const std::vector<int64_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

}  // namespace

std::size_t Context::enter(CollectiveRecord c, const Access& access, bool library) {
  const bool sends = c.kind == "send";
  const auto channel =
      c.is_p2p() ? std::make_tuple(c.group, sends ? rank() : c.peer, sends ? c.peer : rank())
                 : std::make_tuple(c.group, -1, -1);
  c.seq = next_number_[channel]++;
  logs_.collectives.push_back(std::move(c));
  const CollectiveRecord& entered = logs_.collectives.back();
  if (state_.flight) state_.flight->enter(entered);
  if (!entered.is_p2p()) {
    OpRecord& op = log_op(entered.stream, "collective", entered.kind, access,
                          static_cast<int64_t>(entered.group), library);
    op.epoch = entered.seq;
  }
  return logs_.collectives.size() - 1;
}

void Context::enqueue_collective(Stream s, CollectiveCall call, const Access& access) {
  const uint64_t bytes = call.kind == "all_to_all_v"
                             ? total(call.send_counts) * dtype_size(call.dtype)
                             : call.count * dtype_size(call.dtype);
  const std::size_t at = enter(CollectiveRecord{0, call.kind, s.id, call.dtype, bytes,
                                                call.kind == "broadcast" ? call.root : -1, call.op},
                               access, false);
  call.seq = logs_.collectives[at].seq;
  state_.backend->collective(s.id, std::move(call));
  issued();
}

void Context::all_reduce(Stream s, const Buffer& buf, DType dtype, ReduceOp op) {
  CollectiveCall c{.kind = "all_reduce",
                   .dtype = dtype,
                   .op = op,
                   .in = buf.ptr,
                   .out = buf.ptr,
                   .count = elements(buf, dtype, "all_reduce")};
  enqueue_collective(s, std::move(c), Access{{buf}, {buf}});
}

void Context::all_gather(Stream s, const Buffer& in, const Buffer& out, DType dtype) {
  const uint64_t n = elements(in, dtype, "all_gather");
  if (out.bytes != in.bytes * static_cast<uint64_t>(world_size())) {
    CPRR_THROW_AS(CaseFailure, "all_gather: output has {} bytes, needs world_size * {} = {}",
                  out.bytes, in.bytes, in.bytes * world_size());
  }
  CollectiveCall c{.kind = "all_gather", .dtype = dtype, .in = in.ptr, .out = out.ptr, .count = n};
  enqueue_collective(s, std::move(c), Access{{in}, {out}});
}

void Context::all_to_all_v(Stream s, const Buffer& in, std::vector<int64_t> send_counts,
                           const Buffer& out, std::vector<int64_t> recv_counts, DType dtype) {
  const auto w = static_cast<std::size_t>(world_size());
  if (send_counts.size() != w || recv_counts.size() != w) {
    CPRR_THROW_AS(CaseFailure, "all_to_all_v: {} send and {} recv counts for a world of {}",
                  send_counts.size(), recv_counts.size(), w);
  }
  for (const auto* counts : {&send_counts, &recv_counts}) {
    for (int64_t n : *counts) {
      if (n < 0) CPRR_THROW_AS(CaseFailure, "all_to_all_v: negative count {}", n);
    }
  }
  const uint64_t elem = dtype_size(dtype);
  if (static_cast<uint64_t>(total(send_counts)) * elem > in.bytes ||
      static_cast<uint64_t>(total(recv_counts)) * elem > out.bytes) {
    CPRR_THROW_AS(CaseFailure, "all_to_all_v: counts exceed buffers ({} in / {} out bytes)",
                  in.bytes, out.bytes);
  }
  // The declared accesses are the bytes the counts cover, so a partly filled buffer is no
  // uninitialized read and a partly received one no false "written".
  const Access access{{in.slice(0, total(send_counts) * elem)},
                      {out.slice(0, total(recv_counts) * elem)}};
  CollectiveCall c{.kind = "all_to_all_v",
                   .dtype = dtype,
                   .in = in.ptr,
                   .out = out.ptr,
                   .send_counts = std::move(send_counts),
                   .recv_counts = std::move(recv_counts)};
  enqueue_collective(s, std::move(c), access);
}

void Context::broadcast(Stream s, const Buffer& buf, DType dtype, int root) {
  if (root < 0 || root >= world_size()) {
    CPRR_THROW_AS(CaseFailure, "broadcast: root {} outside world of {}", root, world_size());
  }
  CollectiveCall c{.kind = "broadcast",
                   .dtype = dtype,
                   .root = root,
                   .in = buf.ptr,
                   .out = buf.ptr,
                   .count = elements(buf, dtype, "broadcast")};
  enqueue_collective(s, std::move(c), Access{{buf}, {buf}});
}

void Context::message(Stream s, const char* kind, int peer, const Buffer& buf, DType dtype,
                      const Access& access) {
  if (peer < 0 || peer >= world_size() || peer == rank()) {
    CPRR_THROW_AS(CaseFailure, "{} to or from rank {}: rank {} of a world of {} has peers 0..{} "
                  "but itself",
                  kind, peer, rank(), world_size(), world_size() - 1);
  }
  if (buf.bytes % dtype_size(dtype) != 0) {
    CPRR_THROW_AS(CaseFailure, "{} of buffer {}: {} bytes are not a multiple of {} ({})", kind,
                  buf.id, buf.bytes, dtype_size(dtype), dtype_name(dtype));
  }
  CollectiveRecord c{0, kind, s.id, dtype, buf.bytes, -1, ReduceOp::sum, 0, 0, peer};
  const std::size_t at = enter(std::move(c), access, false);
  const uint64_t seq = logs_.collectives[at].seq;
  // The op of the log: what it reads or writes, on its stream.
  // Its peer, group and number ride on the op, so the trace can draw the message's arrow.
  OpRecord& op = log_op(s.id, "kernel",
                        fmt::format("{} #{} {} rank {}", kind, seq,
                                    std::string_view(kind) == "send" ? "to" : "from", peer),
                        access);
  op.peer = peer;
  op.event = 0;
  op.epoch = seq;
  state_.backend->collective(
      s.id, CollectiveCall{.kind = kind,
                           .seq = seq,
                           .dtype = dtype,
                           .root = peer,
                           .in = std::string_view(kind) == "send" ? buf.ptr : nullptr,
                           .out = std::string_view(kind) == "recv" ? buf.ptr : nullptr,
                           .count = buf.bytes / dtype_size(dtype)});
  issued();
}

void Context::send(Stream s, int peer, const Buffer& buf, DType dtype) {
  message(s, "send", peer, buf, dtype, Access{{buf}, {}});
}

void Context::recv(Stream s, int peer, const Buffer& buf, DType dtype) {
  message(s, "recv", peer, buf, dtype, Access{{}, {buf}});
}

void Context::barrier(Stream s) { enqueue_collective(s, CollectiveCall{.kind = "barrier"}, {}); }

void Context::probe(std::string name, const Buffer& b, DType dtype, Stream s) {
  capture(false, std::move(name), b, dtype, {}, s);
}

void Context::output(std::string name, const Buffer& b, DType dtype, std::vector<int64_t> shape,
                     Stream s) {
  capture(true, std::move(name), b, dtype, std::move(shape), s);
}

void Context::capture(bool is_output, std::string name, const Buffer& b, DType dtype,
                      std::vector<int64_t> shape, Stream s) {
  if (shape.empty()) shape = {static_cast<int64_t>(elements(b, dtype, name.c_str()))};
  Capture& slot = add_capture(is_output, std::move(name), dtype, std::move(shape), b.bytes, s.id,
                              Access{{b}, {}});
  // Hashing runs when the stream reaches this point, so a probe sees exactly what later ops see.
  if (state_.capture) {
    state_.hasher->enqueue(s.id, fmt::format("{} {}", is_output ? "output" : "probe", slot.name),
                           b.ptr, b.bytes, slot);
  }
  issued();
}

Capture& Context::add_capture(bool is_output, std::string name, DType dtype,
                              std::vector<int64_t> shape, uint64_t bytes, int stream,
                              const Access& access) {
  std::deque<Capture>& list = is_output ? outputs_ : probes_;
  Capture& slot = list.emplace_back();
  slot.seq = static_cast<uint32_t>(list.size() - 1);
  slot.name = std::move(name);
  slot.dtype = dtype;
  slot.shape = std::move(shape);
  slot.bytes = bytes;
  slot.stream = stream;
  log_op(stream, is_output ? "output" : "probe", slot.name, access);
  return slot;
}

}  // namespace cprr
