#pragma once
// Which transport a world's collectives take: decided here alone, by choose_transport, from what
// the ranks said in their hellos. NCCL refuses two ranks of one communicator on one GPU, so a
// cuda world whose ranks share a GPU goes through Gloo staged through host memory
// (runtime/cuda_staged.h); --collectives forces either. What is said before a world's ranks
// exist (the start line, cpreplay's comparison with the record, --collectives nccl refused before
// the run, a rank's NCCL id made or not) is the same decision over the hellos a world of this
// host's ranks will send (local_transport), not a second rule.
#include <string>
#include <vector>

#include "runtime/backend.h"

namespace cprr {

/// One rank as its hello described it.
struct RankDevice {
  int device = -1;  ///< Hello::device
  std::string gpu;  ///< Hello::gpu: ranks with one identity share a GPU
};

struct TransportChoice {
  CollectiveTransport transport = CollectiveTransport::gloo;
  /// Each rank's GPU in rank order ("0,0,0,0"); empty on the cpu backend.
  std::string rank_gpus;
};

/// `requested` is --collectives: auto (NCCL when every rank has a GPU of its own), nccl or gloo.
/// Throws UsageError for nccl on the cpu backend or where ranks share a GPU (naming them), and
/// for the staged path or the cpu backend across hosts (their Gloo connects over loopback).
TransportChoice choose_transport(BackendKind backend, CollectivesRequest requested,
                                 const std::vector<RankDevice>& ranks);

/// Checks --collectives before anything starts: not nccl on the cpu backend. Throws UsageError
/// naming the option and what to pass. (choose_transport checks it too: a world never runs it.)
void check_collectives(CollectivesRequest requested, BackendKind backend);

/// The GPU a rank of this host runs on, among `gpus` visible ones: ranks share them round-robin
/// (the cuda backend places its rank by this).
constexpr int local_device(int local_rank, int gpus) { return local_rank % gpus; }

/// choose_transport's decision for a cuda world of `world_size` ranks on this host's `gpus`
/// GPUs, each on its local_device, made before the ranks say so; gloo without a GPU (the cpu
/// backend). Throws choose_transport's UsageError for --collectives nccl where ranks would share.
CollectiveTransport local_transport(int world_size, int gpus, CollectivesRequest requested);

/// The line a run prints at its start for worlds of `world_size` ranks on `gpus` GPUs of one
/// host ("4 ranks on 1 GPU: collectives through Gloo, staged through host memory"); empty when
/// every rank has a GPU of its own and NCCL carries the collectives.
std::string sharing_line(int world_size, int gpus, CollectivesRequest requested);

}  // namespace cprr
