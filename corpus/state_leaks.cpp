// Seeded state-leak bugs from seed 001, each with its fixed twin. Both leak only in a reused
// process, so a fresh run passes and only the fresh-vs-pooled differential can see them.
// (This file sorts after healthy_*.cpp, so in a corpus run its cases run late in their pooled
// world, after many innocent predecessors: delta debugging has real work to do.)
#include <map>
#include <string>

#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

// A module-level table of model configurations, like model_configs_* in seed 001.
struct AttnConfig {
  std::string mask = "causal";
  int heads = 8;
};

std::map<std::string, AttnConfig>& model_configs() {
  static std::map<std::string, AttnConfig> table{
      {"cp_1_0", {"causal", 8}}, {"cp_1_1", {"causal", 8}}, {"cp_2_0", {"no_mask", 4}}};
  return table;
}

// Runs a toy masked attention whose result depends on the config, so the config leaks into the
// output hashes as well as into the check.
void attend_with(Context& ctx, const AttnConfig& cfg, const std::string& format) {
  const uint64_t n = 4096;
  const Buffer scores = ctx.alloc("scores", n * 4);
  const float bias = cfg.mask == "causal" ? 0.0f : 1.0f;
  ctx.launch(ctx.stream(), "fill", n,
             kernels::FillConst<float>{scores.as<float>(), bias + cfg.heads}, Access{{}, {scores}});
  ctx.all_reduce(ctx.stream(), scores, DType::f32);
  ctx.output("scores", scores, DType::f32);
  ctx.synchronize();
  // The kernel behind the format supports only these masks (seed 001's assert).
  const bool supported = format == "thd" ? cfg.mask == "padding_causal"
                                         : cfg.mask == "causal" || cfg.mask == "no_mask";
  CPRR_EXPECT(supported, "format {} does not support mask '{}'", format, cfg.mask);
}

// A generator living for the whole process, like torch's default generator: seeded once at
// import, never per case.
Rng& user_rng() {
  static Rng rng(1234);
  return rng;
}

Rng& fixed_rng() {
  static Rng rng(1234);
  return rng;
}

void sum_random_inputs(Context& ctx, Rng& rng) {
  const auto n = static_cast<uint64_t>(ctx.param_int("n"));
  const Buffer host = ctx.alloc("host_inputs", n * 4, MemPool::host);
  const Buffer dev = ctx.alloc("inputs", n * 4);
  for (uint64_t i = 0; i < n; ++i)
    host.as<int32_t>()[i] = static_cast<int32_t>(rng.uniform(0, 999));
  ctx.host_access("draw inputs", Access{{}, {host}});
  ctx.copy(ctx.stream(), dev, host);
  ctx.all_reduce(ctx.stream(), dev, DType::i32);
  ctx.output("sum", dev, DType::i32);
}

}  // namespace

CPRR_CASE(config_mutation, "bug/config_mutation",
          {.world_sizes = {2, 4},
           .grid = {{"format", {"thd", "bshd"}}},
           .description = "the thd branch rewrites a shared config in place; a later bshd case "
                          "reading the same entry fails only pooled",
           .seeded_bug = "state_leak"}) {
  AttnConfig& cfg = model_configs().at("cp_1_0");  // a reference into the shared table: the bug
  if (ctx.param("format") == "thd" && cfg.mask == "causal") cfg.mask = "padding_causal";
  attend_with(ctx, cfg, ctx.param("format"));
}

CPRR_CASE(config_mutation_fixed, "fixed/config_mutation",
          {.world_sizes = {2, 4},
           .grid = {{"format", {"thd", "bshd"}}},
           .description = "the twin: the thd branch adjusts its own copy of the config"}) {
  // Its own table entry, so the bug case's pollution of cp_1_0 cannot reach it; and a copy, so it
  // pollutes nothing itself.
  AttnConfig cfg = model_configs().at("cp_1_1");
  if (ctx.param("format") == "thd" && cfg.mask == "causal") cfg.mask = "padding_causal";
  attend_with(ctx, cfg, ctx.param("format"));
}

CPRR_CASE(global_rng, "bug/global_rng",
          {.world_sizes = {2, 4},
           .grid = {{"n", {"256", "4096"}}},
           .description = "inputs from a process-wide generator the case never reseeds",
           .seeded_bug = "state_leak"}) {
  sum_random_inputs(ctx, user_rng());
}

// The fix of seed 001: reseed at the start of every case (a reset hook runs before each case).
CPRR_RESET_HOOK(reseed_fixed_rng) { fixed_rng().reseed(1234); }

CPRR_CASE(global_rng_fixed, "fixed/global_rng",
          {.world_sizes = {2, 4},
           .grid = {{"n", {"256", "4096"}}},
           .description = "the twin: a reset hook reseeds the generator before every case"}) {
  sum_random_inputs(ctx, fixed_rng());
}

}  // namespace cprr
