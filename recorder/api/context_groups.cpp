// Context: groups, a split of the world into ranks that call collectives and messages among
// themselves (Context::split), and what a Group knows of itself.
#include "recorder/api/context.h"

namespace cprr {

int Group::world_rank(int r) const {
  if (r < 0 || r >= size()) {
    CPRR_THROW_AS(CaseFailure, "rank {} is not a rank of group {} (ranks 0..{})", r, id_,
                  size() - 1);
  }
  return ranks_[static_cast<std::size_t>(r)];
}

Context& Group::context(const char* what) const {
  if (ctx_ == nullptr || !member()) {
    CPRR_THROW_AS(CaseFailure,
                  "{} on a group this rank is not in: it split with a negative color at {} (check "
                  "Group::member() first)",
                  what, split_.empty() ? "a split" : split_);
  }
  return *ctx_;
}

uint64_t Group::members_mask() const {
  if (id_ == 0 || ctx_ == nullptr || ctx_->world_size() > 64) return 0;
  uint64_t mask = 0;
  for (int r : ranks_) mask |= uint64_t{1} << r;
  return mask;
}

void Group::check_peer(const char* kind, int peer) const {
  if (peer < 0 || peer >= size() || peer == rank_) {
    CPRR_THROW_AS(CaseFailure,
                  "{} to or from rank {}: rank {} of {} ({} ranks) has peers 0..{} but itself",
                  kind, peer, rank_, id_ == 0 ? "the world" : fmt::format("group {}", id_), size(),
                  size() - 1);
  }
}

Group Context::split(int color, int key) {
  // A collective of the world, on the host: numbered among the world's, so a rank that skips
  // it or calls another collective there is named like any other.
  CollectiveRecord call;
  call.kind = "split";
  call.stream = -1;
  call.dtype = DType::i32;
  const uint64_t seq = logs_.collectives[enter(std::move(call), Access{}, false)].seq;
  const SplitVote mine{color, key};
  const std::vector<SplitVote> votes =
      state_.backend->split_votes(mine, static_cast<uint32_t>(seq));
  Group made;
  made.split_ = fmt::format("split #{} (color {})", seq, color);
  uint32_t id = next_group_;
  for (auto& [c, ranks] : split_groups(votes)) {
    if (color >= 0 && c == color) {
      made.ctx_ = this;
      made.id_ = id;
      made.rank_ = group_rank(ranks, rank());
      made.ranks_ = std::move(ranks);
    }
    ++id;
  }
  next_group_ = id;
  state_.backend->make_group(made.id_, mine, made.ranks_);
  if (made.member()) {
    logs_.groups.push_back(GroupRecord{made.id_, made.ranks_,
                                       std::string(transport_name(state_.backend->transport())),
                                       fmt::format("split #{} color {}", seq, color)});
  }
  return made;
}

}  // namespace cprr
