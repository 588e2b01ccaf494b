#pragma once
// What ops handed buffers with no direction really write: a Triton kernel's pointers,
// an extension's, Access::uses. One fresh replay probes them (Perturbation::probe_touches: the
// bytes each is handed, copied right before it and once it ran); its op logs carry what each
// changed (OpRecord::probed). Those directions are put into the unperturbed logs the checks read,
// so the race check sees known writes (a race of known directions, decided as any other) and
// bytes left unchanged (never a write: two kernels reading one weight are no candidate), and the
// uninitialized-read check stops taking an op that wrote nothing as a writer.
#include <string>
#include <vector>

#include "data/execution.h"

namespace cprr {

/// Whether any rank of `e` logged an op with accesses of unknown direction not probed yet.
bool has_unknown_directions(const ExecutionResult& e);

/// What applying a probe to one execution did.
struct ProbeApplied {
  int ops = 0;  ///< ops that took the probe's directions
  /// Ops that could not (the probe's run logged another op there): the first, as a line.
  std::string mismatch;
};

/// Puts `probe`'s learned directions into `target`, rank by rank. The ops with accesses of unknown
/// direction line up in order (the k-th of the probe with the k-th of the target, a probed one
/// counted where it had them), since work cprr itself does in the probe may add ops of its own;
/// a pair takes the probe's writes and unchanged bytes only when its kind, name, writes so far
/// and bytes handed agree. A rank's first pair that disagrees stops that rank (ProbeApplied).
ProbeApplied apply_probe(const ExecutionResult& probe, ExecutionResult& target);

/// One line per op `e`'s probe learned (at most `limit`, then a count), naming the buffers:
/// "rank 0 op #5 (kernel 'scale'): writes 'dst' [0, 262144); leaves 'src' [0, 262144) unchanged".
std::vector<std::string> describe_learned(const ExecutionResult& e, std::size_t limit);

}  // namespace cprr
