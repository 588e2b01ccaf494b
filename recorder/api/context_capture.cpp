// Context: collectives (logged with their fingerprints, entered in the flight record) and captures
// (probe/output: hashed on the device or the host, sent with the case's result).
#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

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

void Context::drop_raised_collectives() {
  if (raised_.empty()) return;
  using Channel = std::tuple<uint32_t, int32_t, int32_t>;  // as enter() numbers calls
  const auto channel_of = [this](const CollectiveRecord& c) -> Channel {
    if (!c.is_p2p()) return {c.group, -1, -1};
    const bool sends = c.kind == "send";
    return {c.group, sends ? rank() : c.peer, sends ? c.peer : rank()};
  };
  std::map<Channel, std::set<uint64_t>> dropped;  // each channel's raised numbers
  for (const std::size_t i : raised_) {
    const CollectiveRecord& c = logs_.collectives[i];
    dropped[channel_of(c)].insert(c.seq);
  }
  // How far a later call on `ch` moves down: one for each raised call before it.
  const auto shift = [&](const Channel& ch, uint64_t seq) -> uint64_t {
    const auto it = dropped.find(ch);
    if (it == dropped.end()) return 0;
    return static_cast<uint64_t>(std::distance(it->second.begin(), it->second.lower_bound(seq)));
  };
  // A collective's op entry names its group (event) and number (epoch); a message has none.
  for (OpRecord& op : logs_.ops) {
    if (op.kind != "collective") continue;
    const Channel ch{static_cast<uint32_t>(op.event), -1, -1};
    const auto it = dropped.find(ch);
    if (it == dropped.end()) continue;
    if (it->second.count(op.epoch)) {
      // Seqs stay stable (every op is named by its seq): the call stays an op of its stream,
      // joined to no peer's.
      op.kind = op.stream < 0 ? "host" : "kernel";
      op.name += " (raised: not a collective of the log)";
      op.event = -1;
      op.epoch = 0;
    } else {
      op.epoch -= shift(ch, op.epoch);
    }
  }
  std::vector<CollectiveRecord> kept;
  for (std::size_t i = 0; i < logs_.collectives.size(); ++i) {
    if (raised_.count(i)) continue;
    CollectiveRecord c = std::move(logs_.collectives[i]);
    c.seq -= shift(channel_of(c), c.seq);
    kept.push_back(std::move(c));
  }
  logs_.collectives = std::move(kept);
  raised_.clear();
}

void Context::enqueue_collective(const Group& g, Stream s, CollectiveCall call,
                                 const Access& access) {
  const uint64_t elem = dtype_size(call.dtype);
  CollectiveRecord c;
  c.kind = call.kind;
  c.stream = s.id;
  c.dtype = call.dtype;
  c.bytes = call.kind == "all_to_all_v" ? total(call.send_counts) * elem : call.count * elem;
  c.root = call.kind == "broadcast" ? g.world_rank(call.root) : -1;
  c.op = call.op;
  c.group = g.id();
  c.members = g.members_mask();
  if (call.kind == "all_to_all_v") {
    // Per peer, in ascending world ranks (as the layout check reads them), so a count one rank
    // sends that its peer does not expect is named.
    std::vector<std::pair<int, std::size_t>> by_world;
    for (std::size_t r = 0; r < call.send_counts.size(); ++r) {
      by_world.emplace_back(g.world_rank(static_cast<int>(r)), r);
    }
    std::sort(by_world.begin(), by_world.end());
    for (const auto& [world, r] : by_world) {
      c.send_bytes.push_back(static_cast<uint64_t>(call.send_counts[r]) * elem);
      c.recv_bytes.push_back(static_cast<uint64_t>(call.recv_counts[r]) * elem);
    }
  }
  state_.backend->before_communication(true);  // set-up first, then the op's delay
  const std::size_t at = enter(std::move(c), access, false);
  call.seq = logs_.collectives[at].seq;
  call.group = g.id();
  state_.backend->collective(s.id, std::move(call));
  issued();
}

void Context::message(const Group& g, Stream s, const char* kind, int peer, const Buffer& buf,
                      DType dtype, const Access& access) {
  g.check_peer(kind, peer);
  if (buf.bytes % dtype_size(dtype) != 0) {
    CPRR_THROW_AS(CaseFailure, "{} of buffer {}: {} bytes are not a multiple of {} ({})", kind,
                  buf.id, buf.bytes, dtype_size(dtype), dtype_name(dtype));
  }
  const int world_peer = g.world_rank(peer);
  CollectiveRecord c{
      0, kind, s.id, dtype, buf.bytes, -1, ReduceOp::sum, g.id(), g.members_mask(), world_peer};
  state_.backend->before_communication(false);  // set-up first, then the op's delay
  const std::size_t at = enter(std::move(c), access, false);
  const uint64_t seq = logs_.collectives[at].seq;
  const bool sends = std::string_view(kind) == "send";
  // The op of the log: what it reads or writes, on its stream.
  // Its peer, group and number ride on the op, so the trace can draw the message's arrow.
  OpRecord& op =
      log_op(s.id, "kernel",
             fmt::format("{} #{} {} rank {}{}", kind, seq, sends ? "to" : "from", world_peer,
                         g.id() == 0 ? "" : fmt::format(" (group {})", g.id())),
             access);
  op.peer = world_peer;
  op.event = g.id();
  op.epoch = seq;
  state_.backend->collective(s.id, CollectiveCall{.group = g.id(),
                                                  .kind = kind,
                                                  .seq = seq,
                                                  .dtype = dtype,
                                                  .root = peer,
                                                  .in = sends ? buf.ptr : nullptr,
                                                  .out = sends ? nullptr : buf.ptr,
                                                  .count = buf.bytes / dtype_size(dtype)});
  issued();
}

void Context::all_reduce(Stream s, const Buffer& buf, DType dtype, ReduceOp op) {
  world_.all_reduce(s, buf, dtype, op);
}

void Context::all_gather(Stream s, const Buffer& in, const Buffer& out, DType dtype) {
  world_.all_gather(s, in, out, dtype);
}

void Context::all_to_all_v(Stream s, const Buffer& in, std::vector<int64_t> send_counts,
                           const Buffer& out, std::vector<int64_t> recv_counts, DType dtype) {
  world_.all_to_all_v(s, in, std::move(send_counts), out, std::move(recv_counts), dtype);
}

void Context::broadcast(Stream s, const Buffer& buf, DType dtype, int root) {
  world_.broadcast(s, buf, dtype, root);
}

void Context::barrier(Stream s) { world_.barrier(s); }

void Context::send(Stream s, int peer, const Buffer& buf, DType dtype) {
  world_.send(s, peer, buf, dtype);
}

void Context::recv(Stream s, int peer, const Buffer& buf, DType dtype) {
  world_.recv(s, peer, buf, dtype);
}

void Group::all_reduce(Stream s, const Buffer& buf, DType dtype, ReduceOp op) const {
  Context& ctx = context("all_reduce");
  CollectiveCall c{.kind = "all_reduce",
                   .dtype = dtype,
                   .op = op,
                   .in = buf.ptr,
                   .out = buf.ptr,
                   .count = elements(buf, dtype, "all_reduce")};
  ctx.enqueue_collective(*this, s, std::move(c), Access{{buf}, {buf}});
}

void Group::all_gather(Stream s, const Buffer& in, const Buffer& out, DType dtype) const {
  Context& ctx = context("all_gather");
  const uint64_t n = elements(in, dtype, "all_gather");
  if (out.bytes != in.bytes * static_cast<uint64_t>(size())) {
    CPRR_THROW_AS(CaseFailure, "all_gather: output has {} bytes, needs {} ranks * {} = {}",
                  out.bytes, size(), in.bytes, in.bytes * size());
  }
  CollectiveCall c{.kind = "all_gather", .dtype = dtype, .in = in.ptr, .out = out.ptr, .count = n};
  ctx.enqueue_collective(*this, s, std::move(c), Access{{in}, {out}});
}

void Group::all_to_all_v(Stream s, const Buffer& in, std::vector<int64_t> send_counts,
                         const Buffer& out, std::vector<int64_t> recv_counts, DType dtype) const {
  Context& ctx = context("all_to_all_v");
  const auto w = static_cast<std::size_t>(size());
  if (send_counts.size() != w || recv_counts.size() != w) {
    CPRR_THROW_AS(CaseFailure, "all_to_all_v: {} send and {} recv counts for {} ranks",
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
  ctx.enqueue_collective(*this, s, std::move(c), access);
}

void Group::broadcast(Stream s, const Buffer& buf, DType dtype, int root) const {
  Context& ctx = context("broadcast");
  if (root < 0 || root >= size()) {
    CPRR_THROW_AS(CaseFailure, "broadcast: root {} outside {} ranks", root, size());
  }
  CollectiveCall c{.kind = "broadcast",
                   .dtype = dtype,
                   .root = root,
                   .in = buf.ptr,
                   .out = buf.ptr,
                   .count = elements(buf, dtype, "broadcast")};
  ctx.enqueue_collective(*this, s, std::move(c), Access{{buf}, {buf}});
}

void Group::barrier(Stream s) const {
  context("barrier").enqueue_collective(*this, s, CollectiveCall{.kind = "barrier"}, {});
}

void Group::send(Stream s, int peer, const Buffer& buf, DType dtype) const {
  context("send").message(*this, s, "send", peer, buf, dtype, Access{{buf}, {}});
}

void Group::recv(Stream s, int peer, const Buffer& buf, DType dtype) const {
  context("recv").message(*this, s, "recv", peer, buf, dtype, Access{{}, {buf}});
}

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
