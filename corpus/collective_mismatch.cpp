// Sequence parallelism with a sequence length the world size does not divide: each rank owns
// ceil(len / W) tokens except the last, which owns the remainder. Averaging a per-token
// statistic over the ranks with an all-reduce of each rank's own shard then calls the
// collective with a different count on the last rank: NCCL reads past the short rank's buffer
// or waits for bytes that never come; Gloo aborts. Either way the run ends as a crash or a hang
// whose cause is one line of a stderr tail, unless the harness compares the ranks' calls.
// - bug/collective_size_mismatch: the last rank all-reduces its shorter shard (verdict
//   collective_mismatch, naming the ranks and both sizes).
// - fixed/collective_size_mismatch: every rank pads its shard to ceil(len / W) tokens.
#include <cstdint>
#include <vector>

#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

constexpr uint64_t kHidden = 64;

// Tokens the sequence has: one more than a multiple of every world size the corpus runs.
uint64_t sequence_length(int world_size) { return 256 * static_cast<uint64_t>(world_size) + 1; }

void average_token_stats(Context& ctx, bool fixed) {
  const Stream s = ctx.stream();
  const uint64_t len = sequence_length(ctx.world_size());
  const uint64_t per_rank = (len + ctx.world_size() - 1) / ctx.world_size();
  const uint64_t first = per_rank * static_cast<uint64_t>(ctx.rank());
  const uint64_t owned = first >= len ? 0 : std::min(per_rank, len - first);
  const uint64_t rows = fixed ? per_rank : owned;
  const Buffer stats = ctx.alloc("token_stats", rows * kHidden * 4);
  // Padding rows (fixed only) hold zeros, so they add nothing to the sum.
  ctx.launch(s, "zero_stats", rows * kHidden, kernels::FillConst<float>{stats.as<float>(), 0.0f},
             Access{{}, {stats}});
  ctx.launch(s, "token_stats", owned * kHidden,
             kernels::FillConst<float>{stats.as<float>(), static_cast<float>(ctx.rank() + 1)},
             Access{{}, {stats.slice(0, owned * kHidden * 4)}});
  ctx.all_reduce(s, stats, DType::f32);
  ctx.output("token_stats", stats, DType::f32);
  if (!fixed) return;
  // Row i of the sum holds the ranks that own a row i: all of them for the full shards' rows.
  const std::vector<float> got = ctx.read<float>(s, stats);
  const uint64_t last_owned = len - per_rank * static_cast<uint64_t>(ctx.world_size() - 1);
  const int w = ctx.world_size();
  for (uint64_t row = 0; row < per_rank; ++row) {
    float want = static_cast<float>(w * (w + 1) / 2);
    if (row >= last_owned) want -= static_cast<float>(w);
    CPRR_EXPECT(got[row * kHidden] == want, "token_stats[{}] = {}, expected {}", row,
                got[row * kHidden], want);
  }
}

}  // namespace

CPRR_CASE(collective_size_mismatch, "bug/collective_size_mismatch",
          {.world_sizes = {2, 4},
           .timeout_s = 20,
           .description = "a sequence the world size does not divide: the last rank all-reduces "
                          "its shorter shard",
           .seeded_bug = "collective_mismatch"}) {
  average_token_stats(ctx, false);
}

CPRR_CASE(collective_size_mismatch_fixed, "fixed/collective_size_mismatch",
          {.world_sizes = {2, 4},
           .description = "the twin: every rank pads its shard to the same number of tokens"}) {
  average_token_stats(ctx, true);
}

}  // namespace cprr
