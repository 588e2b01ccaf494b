#pragma once
// Which transport a world's collectives take, from what its ranks said in their hellos: NCCL
// refuses two ranks of one communicator on one GPU, so a cuda world whose ranks share a GPU goes
// through Gloo staged through host memory (runtime/cuda_staged.h); --collectives forces either.
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
TransportChoice choose_transport(const std::string& backend, CollectivesRequest requested,
                                 const std::vector<RankDevice>& ranks);

/// Checks --collectives before anything starts: not nccl on the cpu backend. Throws UsageError
/// naming the option and what to pass.
void check_collectives(CollectivesRequest requested, const std::string& backend);

/// Local ranks only: throws UsageError when --collectives nccl cannot run a world of
/// `world_size` ranks on `gpus` GPUs (they would share), before any world starts.
void check_nccl_fits(CollectivesRequest requested, int world_size, int gpus);

/// The transport a cuda world of `world_size` local ranks takes on `gpus` GPUs under `requested`
/// (what choose_transport decides from the hellos when every rank runs on this host); gloo
/// without a GPU (the cpu backend).
CollectiveTransport local_transport(int world_size, int gpus, CollectivesRequest requested);

/// The line a run prints at its start for worlds of `world_size` ranks on `gpus` GPUs of one
/// host ("4 ranks on 1 GPU: collectives through Gloo, staged through host memory"); empty when
/// every rank has a GPU of its own and NCCL carries the collectives.
std::string sharing_line(int world_size, int gpus, CollectivesRequest requested);

}  // namespace cprr
