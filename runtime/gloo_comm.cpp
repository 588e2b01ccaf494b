#include "runtime/gloo_comm.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <sys/socket.h>

#include <cstddef>
#include <exception>
#include <filesystem>
#include <utility>

#include "runtime/error.h"

namespace cprr {
namespace {

/// A TCP device bound to IPv4 loopback: every rank of a world runs on this host, and naming the
/// address (not the interface "lo") avoids depending on interface names inside containers.
std::shared_ptr<gloo::transport::Device> loopback_device() {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  return gloo::transport::tcp::CreateDevice(attr);
}

/// Calls `f(T{})` with T the C++ type of `dtype`.
template <class F>
void visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::u8:
      return f(uint8_t{});
    case DType::i32:
      return f(int32_t{});
    case DType::i64:
      return f(int64_t{});
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    case DType::i8:
      return f(int8_t{});
    case DType::i16:
      return f(int16_t{});
    case DType::f16:
    case DType::bf16:
      break;  // Python cases' tensors carry them; cprr's own collectives do not reduce them
  }
  CPRR_THROW("cprr's collectives do not take dtype {}", dtype_name(dtype));
}

template <class T>
gloo::AllreduceOptions::Func reduce_function(ReduceOp op) {
  // gloo::sum<T> & co. are overloaded (a 3- and a 4-argument form): name the 4-argument one.
  using Fn = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case ReduceOp::sum:
      return static_cast<Fn>(&gloo::sum<T>);
    case ReduceOp::max:
      return static_cast<Fn>(&gloo::max<T>);
    case ReduceOp::min:
      return static_cast<Fn>(&gloo::min<T>);
  }
  CPRR_THROW("unknown reduce op {}", static_cast<int>(op));
}

/// Runs a gloo call, turning any gloo failure into a cprr::Error that names the collective, its
/// tag and the rank (formatted only on failure: this is on every collective's path).
template <class F>
void guarded(const char* collective, uint32_t tag, int rank, F&& f) {
  try {
    f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    CPRR_THROW("{}(tag {}) on rank {}: {}", collective, tag, rank, e.what());
  }
}

}  // namespace

std::string group_rendezvous(const std::string& world_dir, uint64_t split, uint32_t group) {
  const std::string dir = fmt::format("{}/split{}-group{}", world_dir, split, group);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // every member tries; one makes it
  CPRR_CHECK(std::filesystem::is_directory(dir), "cannot make group {}'s rendezvous '{}': {}",
             group, dir, ec.message());
  return dir;
}

GlooComm::GlooComm(int rank, int size, const std::string& rendezvous_dir,
                   std::chrono::milliseconds timeout)
    : rank_(rank), size_(size) {
  CPRR_CHECK(size >= 1 && rank >= 0 && rank < size, "gloo: rank {} out of range for size {}", rank,
             size);
  // Gloo reads a zero timeout as "wait forever"; a hang is worse than any error here.
  CPRR_CHECK(timeout.count() > 0, "gloo: timeout must be positive, got {} ms", timeout.count());
  try {
    auto device = loopback_device();
    gloo::rendezvous::FileStore store(rendezvous_dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // Set before connecting: connectFullMesh bounds its wait for each peer's address by it.
    context->setTimeout(timeout);
    context->connectFullMesh(store, device);
    context_ = std::move(context);
  } catch (const std::exception& e) {
    CPRR_THROW("gloo rendezvous in '{}' as rank {} of {}: {}", rendezvous_dir, rank, size,
               e.what());
  }
}

GlooComm::~GlooComm() = default;

void GlooComm::reduce_into(void* acc, const void* other, std::size_t count, DType dtype,
                           ReduceOp op) {
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    reduce_function<T>(op)(acc, acc, other, count);
  });
}

void GlooComm::all_reduce(void* buf, std::size_t count, DType dtype, ReduceOp op, uint32_t tag) {
  // Gloo rejects zero elements; every rank has the same count, so all skip alike.
  if (count == 0) return;
  guarded("all_reduce", tag, rank_, [&] {
    visit_dtype(dtype, [&]<class T>(T) {
      gloo::AllreduceOptions opts(context_);
      // Output only: gloo then reduces in place. Ring is pinned so the reduction order (and
      // thus float rounding) never depends on gloo's algorithm choice.
      opts.setOutput(static_cast<T*>(buf), count);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setReduceFunction(reduce_function<T>(op));
      opts.setTag(tag);
      gloo::allreduce(opts);
    });
  });
}

void GlooComm::all_gather(const void* in, void* out, std::size_t count, DType dtype, uint32_t tag) {
  if (count == 0) return;
  guarded("all_gather", tag, rank_, [&] {
    visit_dtype(dtype, [&]<class T>(T) {
      gloo::AllgatherOptions opts(context_);
      // Gloo's typed setters take T*; the input is only read.
      opts.setInput(const_cast<T*>(static_cast<const T*>(in)), count);
      opts.setOutput(static_cast<T*>(out), count * static_cast<std::size_t>(size_));
      opts.setTag(tag);
      gloo::allgather(opts);
    });
  });
}

void GlooComm::all_to_all_v(const void* in, const std::vector<int64_t>& send_counts, void* out,
                            const std::vector<int64_t>& recv_counts, DType dtype, uint32_t tag) {
  CPRR_CHECK(send_counts.size() == static_cast<std::size_t>(size_) &&
                 recv_counts.size() == static_cast<std::size_t>(size_),
             "all_to_all_v(tag {}) on rank {}: {} send and {} recv counts for {} ranks", tag, rank_,
             send_counts.size(), recv_counts.size(), size_);
  for (int r = 0; r < size_; ++r) {
    CPRR_CHECK(send_counts[r] >= 0 && recv_counts[r] >= 0,
               "all_to_all_v(tag {}) on rank {}: negative count for rank {}", tag, rank_, r);
  }
  // Gloo accepts zero counts and null pointers, but memcpy()s the local chunk even when it is
  // empty, and memcpy with a null pointer is undefined: empty buffers (callers may pass nullptr)
  // point at this scratch instead, which is never read or written.
  alignas(8) std::byte scratch[8] = {};
  void* in_ptr = in != nullptr ? const_cast<void*>(in) : scratch;
  void* out_ptr = out != nullptr ? out : scratch;
  guarded("all_to_all_v", tag, rank_, [&] {
    visit_dtype(dtype, [&]<class T>(T) {
      gloo::AlltoallvOptions opts(context_);
      // Gloo's typed setters take T*; the input is only read.
      opts.setInput(static_cast<T*>(in_ptr), send_counts);
      opts.setOutput(static_cast<T*>(out_ptr), recv_counts);
      opts.setTag(tag);
      gloo::alltoallv(opts);
    });
  });
}

void GlooComm::broadcast(void* buf, std::size_t count, DType dtype, int root, uint32_t tag) {
  CPRR_CHECK(root >= 0 && root < size_,
             "broadcast(tag {}) on rank {}: root {} out of range for size {}", tag, rank_, root,
             size_);
  if (count == 0) return;
  guarded("broadcast", tag, rank_, [&] {
    visit_dtype(dtype, [&]<class T>(T) {
      gloo::BroadcastOptions opts(context_);
      // Output only: on the root gloo sends from it, elsewhere it receives into it.
      opts.setOutput(static_cast<T*>(buf), count);
      opts.setRoot(root);
      opts.setTag(tag);
      gloo::broadcast(opts);
    });
  });
}

namespace {

// Point-to-point messages' slots: a prefix of their own, so a message never matches a
// collective's (Gloo's algorithms build theirs from other prefixes and the same tags).
constexpr uint8_t kMessageSlotPrefix = 0xc7;

}  // namespace

void GlooComm::send(const void* buf, std::size_t count, DType dtype, int peer, uint32_t tag) {
  CPRR_CHECK(peer >= 0 && peer < size_ && peer != rank_,
             "send(tag {}) on rank {}: peer {} is not another rank of {}", tag, rank_, peer, size_);
  guarded("send", tag, rank_, [&] {
    auto ub = context_->createUnboundBuffer(const_cast<void*>(buf), count * dtype_size(dtype));
    ub->send(peer, gloo::Slot::build(kMessageSlotPrefix, tag));
    CPRR_CHECK(ub->waitSend(context_->getTimeout()), "send(tag {}) on rank {}: aborted", tag,
               rank_);
  });
}

void GlooComm::recv(void* buf, std::size_t count, DType dtype, int peer, uint32_t tag) {
  CPRR_CHECK(peer >= 0 && peer < size_ && peer != rank_,
             "recv(tag {}) on rank {}: peer {} is not another rank of {}", tag, rank_, peer, size_);
  guarded("recv", tag, rank_, [&] {
    auto ub = context_->createUnboundBuffer(buf, count * dtype_size(dtype));
    ub->recv(peer, gloo::Slot::build(kMessageSlotPrefix, tag));
    CPRR_CHECK(ub->waitRecv(context_->getTimeout()), "recv(tag {}) on rank {}: aborted", tag,
               rank_);
  });
}

void GlooComm::barrier(uint32_t tag) {
  guarded("barrier", tag, rank_, [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(tag);
    gloo::barrier(opts);
  });
}

}  // namespace cprr
