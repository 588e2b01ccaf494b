// CudaBackend: groups, a split of the world (Context::split). NCCL worlds split their
// communicator (ncclCommSplit); worlds whose ranks share GPUs give each group a Gloo context of
// its members, staged through host memory as the world's collectives are.
#include <cstring>
#include <utility>

#include "runtime/cuda_backend.h"
#include "runtime/cuda_check.h"

namespace cprr {

std::vector<SplitVote> CudaBackend::split_votes(SplitVote mine, uint32_t) {
  std::vector<SplitVote> all(static_cast<std::size_t>(world_size_));
  static_assert(sizeof(SplitVote) == 2 * sizeof(int32_t));
  if (staged_) {
    const std::vector<std::byte> bytes = staged_->all_gather_bytes(&mine, sizeof mine);
    std::memcpy(all.data(), bytes.data(), bytes.size());
    return all;
  }
  CPRR_CHECK(comm_ != nullptr, "rank {}: split before the communicator was connected", rank_);
  ensure_symmetric();  // a split is collective over the world: the set-up comes first
  if (split_scratch_ == nullptr) {
    // Made once; cudaMalloc (unlike cudaFree) orders nothing between the case's streams.
    CPRR_CUDA(cudaMalloc(&split_scratch_, all.size() * sizeof(SplitVote)));
  }
  auto* slot =
      static_cast<std::byte*>(split_scratch_) + static_cast<std::size_t>(rank_) * sizeof mine;
  guarded([&] {
    CPRR_CUDA(cudaMemcpyAsync(slot, &mine, sizeof mine, cudaMemcpyHostToDevice, setup_stream_));
    CollectiveCall c{.kind = "all_gather",
                     .dtype = DType::u8,
                     .in = slot,
                     .out = split_scratch_,
                     .count = sizeof mine};
    joined_comm().issue(c, setup_stream_, barrier_scratch_);
    CPRR_CUDA(cudaMemcpyAsync(all.data(), split_scratch_, all.size() * sizeof(SplitVote),
                              cudaMemcpyDeviceToHost, setup_stream_));
    poll_handle(setup_stream_);  // polls, so a rank that never splits cannot block this thread
  });
  return all;
}

void CudaBackend::make_group(uint32_t group, SplitVote mine, const std::vector<int>& members) {
  const uint64_t split = splits_++;
  const int me = group_rank(members, rank_);
  const int size = static_cast<int>(members.size());
  if (comm_) {
    // Collective over the world: every rank splits, the ones without a color too.
    std::unique_ptr<NcclComm> made;  // split_votes, just before, made the world set-up
    guarded(
        [&] { made = joined_comm().split(members.empty() ? -1 : mine.color, mine.key, me, size); });
    if (!made) return;
    std::lock_guard lock(mu_);
    nccl_groups_[group] = std::move(made);
    return;
  }
  if (members.empty()) return;
  auto made = std::make_unique<StagedCollectives>(me, size, device_,
                                                  group_rendezvous(rendezvous_, split, group), 0);
  std::lock_guard lock(mu_);
  staged_groups_[group] = std::move(made);
}

void CudaBackend::end_groups(bool clean) {
  std::lock_guard lock(mu_);
  for (auto& [id, g] : nccl_groups_) ended_nccl_.push_back(std::move(g));
  for (auto& [id, g] : staged_groups_) ended_staged_.push_back(std::move(g));
  nccl_groups_.clear();
  staged_groups_.clear();
  ended_clean_ = ended_clean_ && clean;
}

void CudaBackend::close_ended_groups() {
  std::vector<std::unique_ptr<NcclComm>> nccl;
  std::vector<std::unique_ptr<StagedCollectives>> staged;
  bool clean = true;
  bool aborted = false;
  {
    std::lock_guard lock(mu_);
    std::swap(nccl, ended_nccl_);
    std::swap(staged, ended_staged_);
    std::swap(clean, ended_clean_);
    aborted = !broken_.empty();
  }
  // Finalizing waits for the group's own work, aborting for nothing: a rank whose case failed
  // must not wait on a peer.
  if (!clean || aborted) {
    for (auto& g : nccl) g->abort();
  }
  if (aborted) {
    // A lane may still be inside a Gloo call whose peer is gone: its thread cannot be joined.
    // The rank is replaced after an abort, so the group is left to the process's exit.
    for (auto& g : staged) {
      g->abort();
      (void)g.release();
    }
  }
}

void CudaBackend::check_groups() const {
  std::vector<const NcclComm*> nccl;
  std::vector<const StagedCollectives*> staged;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, g] : nccl_groups_) nccl.push_back(g.get());
    for (const auto& [id, g] : staged_groups_) staged.push_back(g.get());
  }
  // Only this (the case's) thread ends groups, so the pointers outlive the checks.
  for (const NcclComm* g : nccl) g->check_async();
  for (const StagedCollectives* g : staged) g->check_async();
}

void CudaBackend::issue_on_group(int stream, cudaStream_t s, const CollectiveCall& call) {
  NcclComm* nccl = nullptr;
  StagedCollectives* staged = nullptr;
  {
    std::lock_guard lock(mu_);
    if (auto it = nccl_groups_.find(call.group); it != nccl_groups_.end()) nccl = it->second.get();
    if (auto it = staged_groups_.find(call.group); it != staged_groups_.end())
      staged = it->second.get();
  }
  if (nccl != nullptr) {
    nccl->issue(call, s, barrier_scratch_);
  } else if (staged != nullptr) {
    staged->issue(stream, s, call);
  } else {
    CPRR_THROW("rank {}: no group {} in this case", rank_, call.group);
  }
}

}  // namespace cprr
