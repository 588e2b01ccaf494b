#include "runtime/cuda_nccl.h"

#include <nccl_device/core.h>  // ncclTeamLsa (the device API's host half)

#include <cstring>
#include <thread>

#include "runtime/cuda_check.h"

namespace cprr {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::u8:
      return ncclUint8;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::i8:
      return ncclInt8;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i16:
      break;
  }
  CPRR_THROW("dtype {} has no NCCL type", dtype_name(t));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  CPRR_THROW("reduce op {} has no NCCL op", static_cast<int>(op));
}

/// Ends an NCCL group on every path: a group left open by an exception would swallow every later
/// collective of this thread.
class GroupGuard {
 public:
  GroupGuard() { CPRR_NCCL(ncclGroupStart()); }
  ~GroupGuard() {
    if (open_) ncclGroupEnd();
  }
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;
  void end() {
    open_ = false;
    CPRR_NCCL(ncclGroupEnd());
  }

 private:
  bool open_ = true;
};

}  // namespace

std::string nccl_unique_id() {
  ncclUniqueId id;
  CPRR_NCCL(ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

std::string nccl_runtime_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

NcclComm::NcclComm(int rank, int world_size, const std::string& unique_id)
    : world_size_(world_size) {
  ncclUniqueId id;
  CPRR_CHECK(unique_id.size() == sizeof(id.internal),
             "rank {}: NCCL unique id from the controller has {} bytes, expected {}", rank,
             unique_id.size(), sizeof(id.internal));
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so a hang can be ended with ncclCommAbort
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, world_size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    CPRR_THROW("rank {}: ncclCommInitRankConfig: {} ({})", rank, ncclGetErrorString(r),
               ncclGetLastError(comm_));
  }
}

ncclResult_t NcclComm::settle(ncclResult_t state) const {
  // Bounded (5 s): a dead peer must not hold a rank forever.
  for (int i = 0; state == ncclInProgress && i < 50000; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    ncclCommGetAsyncError(comm_, &state);
  }
  return state;
}

void NcclComm::settle_join() {
  std::lock_guard lock(mu_);
  if (!aborted_ && !joined_) settle(ncclInProgress);
}

void NcclComm::wait_joined() {
  if (joined_) return;
  wait_ready("ncclCommInitRankConfig");
  joined_ = true;
}

NcclComm::~NcclComm() {
  std::lock_guard lock(mu_);
  if (aborted_ || comm_ == nullptr) return;
  // Teardown is bounded (5 s per step). A join never waited for (no case used the communicator) is
  // let finish first.
  ncclResult_t state = settle(joined_ ? ncclSuccess : ncclInProgress);
  if (state == ncclSuccess && window_ != nullptr) {
    state = settle(ncclCommWindowDeregister(comm_, window_));
  }
  if (state == ncclSuccess) state = settle(ncclCommFinalize(comm_));
  if (state == ncclSuccess) {
    ncclCommDestroy(comm_);
  } else {
    ncclCommAbort(comm_);
  }
}

std::unique_ptr<NcclComm> NcclComm::split(int color, int key, int group_rank, int group_size) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // as the world's: a hang in the group ends with ncclCommAbort
  ncclComm_t child = nullptr;
  {
    std::lock_guard lock(mu_);
    CPRR_CHECK(!aborted_, "ncclCommSplit: the communicator was aborted");
    CPRR_CHECK(joined_, "ncclCommSplit before the communicator joined (wait_joined)");
    const ncclResult_t r =
        ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      CPRR_THROW("ncclCommSplit(color {}, key {}): {} ({})", color, key, ncclGetErrorString(r),
                 ncclGetLastError(comm_));
    }
  }
  // The split runs as a job of this communicator's (non-blocking) group: settling this one
  // completes it, on every rank, the ones without a color included.
  wait_ready("ncclCommSplit");
  if (color < 0) return nullptr;
  CPRR_CHECK(child != nullptr, "ncclCommSplit(color {}, key {}) made no communicator", color, key);
  auto made = std::unique_ptr<NcclComm>(new NcclComm(child, group_size));
  made->wait_ready("ncclCommSplit (the new communicator)");
  int rank = -1, size = 0;
  CPRR_NCCL(ncclCommUserRank(child, &rank));
  CPRR_NCCL(ncclCommCount(child, &size));
  CPRR_CHECK(rank == group_rank && size == group_size,
             "ncclCommSplit(color {}, key {}) made rank {} of {}; cprr expected rank {} of {}",
             color, key, rank, size, group_rank, group_size);
  return made;
}

void NcclComm::wait_ready(const char* what) const {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    {
      std::lock_guard lock(mu_);
      CPRR_CHECK(!aborted_, "{}: the communicator was aborted", what);
      CPRR_NCCL(ncclCommGetAsyncError(comm_, &state));
    }
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      CPRR_THROW("{}: {} ({})", what, ncclGetErrorString(state), ncclGetLastError(comm_));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void NcclComm::check_async() const {
  std::lock_guard lock(mu_);
  CPRR_CHECK(!aborted_, "the NCCL communicator was aborted (the controller gave up on this case)");
  ncclResult_t state = ncclSuccess;
  CPRR_NCCL(ncclCommGetAsyncError(comm_, &state));
  if (state != ncclSuccess && state != ncclInProgress) {
    CPRR_THROW("NCCL asynchronous error: {} ({})", ncclGetErrorString(state),
               ncclGetLastError(comm_));
  }
}

void NcclComm::issue(const CollectiveCall& c, cudaStream_t s, void* scratch) {
  {
    // Enqueueing returns at once on a non-blocking communicator; holding mu_ keeps abort() from
    // freeing the communicator underneath it.
    std::lock_guard lock(mu_);
    CPRR_CHECK(!aborted_, "{}: the communicator was aborted", c.kind);
    CPRR_CHECK(joined_, "{} before the communicator joined (wait_joined)", c.kind);
    enqueue(c, s, scratch);
  }
  wait_ready(c.kind.c_str());
}

void NcclComm::enqueue(const CollectiveCall& c, cudaStream_t s, void* scratch) {
  const ncclDataType_t t = nccl_type(c.dtype);
  const std::size_t elem = dtype_size(c.dtype);
  if (c.kind == "all_reduce") {
    CPRR_NCCL(ncclAllReduce(c.in, c.out, c.count, t, nccl_op(c.op), comm_, s));
  } else if (c.kind == "all_gather") {
    CPRR_NCCL(ncclAllGather(c.in, c.out, c.count, t, comm_, s));
  } else if (c.kind == "broadcast") {
    CPRR_NCCL(ncclBroadcast(c.in, c.out, c.count, t, c.root, comm_, s));
  } else if (c.kind == "barrier") {
    CPRR_NCCL(ncclAllReduce(scratch, scratch, 1, ncclInt32, ncclSum, comm_, s));
  } else if (c.kind == "all_to_all_v") {
    // Pairs with a zero count are skipped on both sides (a peer's recv count from us is our send
    // count to it), so no send or receive is ever left unmatched.
    GroupGuard group;
    std::size_t send_off = 0, recv_off = 0;
    for (int p = 0; p < world_size_; ++p) {
      const auto sc = static_cast<std::size_t>(c.send_counts.at(p));
      const auto rc = static_cast<std::size_t>(c.recv_counts.at(p));
      if (sc > 0)
        CPRR_NCCL(ncclSend(static_cast<const char*>(c.in) + send_off * elem, sc, t, p, comm_, s));
      if (rc > 0)
        CPRR_NCCL(ncclRecv(static_cast<char*>(c.out) + recv_off * elem, rc, t, p, comm_, s));
      send_off += sc;
      recv_off += rc;
    }
    group.end();
  } else if (c.kind == "send") {
    CPRR_NCCL(ncclSend(c.in, c.count, t, c.root, comm_, s));
  } else if (c.kind == "recv") {
    CPRR_NCCL(ncclRecv(c.out, c.count, t, c.root, comm_, s));
  } else {
    CPRR_THROW("unknown collective '{}'", c.kind);
  }
}

std::string NcclComm::register_window(void* base, std::size_t bytes) {
  ncclResult_t r;
  {
    std::lock_guard lock(mu_);
    CPRR_CHECK(!aborted_, "ncclCommWindowRegister: the communicator was aborted");
    CPRR_CHECK(joined_, "ncclCommWindowRegister before the communicator joined (wait_joined)");
    r = ncclCommWindowRegister(comm_, base, bytes, &window_, NCCL_WIN_COLL_SYMMETRIC);
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    window_ = nullptr;
    return fmt::format("ncclCommWindowRegister: {} ({})", ncclGetErrorString(r),
                       ncclGetLastError(comm_));
  }
  wait_ready("ncclCommWindowRegister");
  return {};
}

int NcclComm::lsa_size() const {
  std::lock_guard lock(mu_);
  CPRR_CHECK(!aborted_, "ncclTeamLsa: the communicator was aborted");
  return ncclTeamLsa(comm_).nRanks;
}

void NcclComm::abort() {
  std::lock_guard lock(mu_);
  if (aborted_.exchange(true) || comm_ == nullptr) return;
  ncclCommAbort(comm_);
}

}  // namespace cprr
