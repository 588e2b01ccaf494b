#include "runtime/transport_choice.h"

#include <fmt/format.h>

#include <map>

#include "runtime/error.h"

namespace cprr {
namespace {

// The host part of a rank's device identity ("host/GPU-uuid" on cuda, "host" on cpu).
std::string host_of(const std::string& gpu) { return gpu.substr(0, gpu.rfind('/')); }

// The first rank on another host than rank 0, or 0 when the world is on one host.
std::size_t rank_on_another_host(const std::vector<RankDevice>& ranks) {
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    if (host_of(ranks[r].gpu) != host_of(ranks[0].gpu)) return r;
  }
  return 0;
}

}  // namespace

void check_collectives(CollectivesRequest requested, BackendKind backend) {
  if (requested == CollectivesRequest::nccl && backend == BackendKind::cpu) {
    CPRR_THROW_AS(UsageError,
                  "--collectives nccl needs the cuda backend (the cpu backend's collectives go "
                  "through Gloo): use --backend cuda, or --collectives auto");
  }
}

TransportChoice choose_transport(BackendKind backend, CollectivesRequest requested,
                                 const std::vector<RankDevice>& ranks) {
  check_collectives(requested, backend);
  if (backend == BackendKind::cpu) {
    // The cpu backend's Gloo binds loopback and its symmetric window is files every rank maps:
    // one host only. Its ranks name their host in Hello::gpu.
    if (const std::size_t r = rank_on_another_host(ranks); r != 0) {
      CPRR_THROW_AS(UsageError,
                    "--backend {}: its collectives (Gloo over loopback) and its symmetric window "
                    "(files every rank maps) join the ranks of one host only, but rank 0 runs on "
                    "{} and rank {} on {}: run it on one host (--launcher local, or a launcher "
                    "placing every rank on one node), or use --backend cuda with a GPU per rank",
                    backend_name(backend), host_of(ranks[0].gpu), r, host_of(ranks[r].gpu));
    }
    return {CollectiveTransport::gloo, {}};
  }
  TransportChoice choice{CollectiveTransport::nccl, {}};
  std::map<std::string, int> first_on;  // GPU identity -> the first rank on it
  std::string shared;                   // the first pair of ranks on one GPU, for messages
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    choice.rank_gpus += fmt::format("{}{}", r == 0 ? "" : ",", ranks[r].device);
    const auto [it, first] = first_on.emplace(ranks[r].gpu, static_cast<int>(r));
    if (!first && shared.empty()) {
      shared = fmt::format("ranks {} and {} share GPU {} ({})", it->second, r, ranks[r].device,
                           ranks[r].gpu);
    }
  }
  if (requested == CollectivesRequest::nccl && !shared.empty()) {
    CPRR_THROW_AS(UsageError,
                  "--collectives nccl: {}, and NCCL refuses two ranks of one communicator on "
                  "one GPU: use --collectives auto (Gloo where ranks share a GPU), leave worlds "
                  "of {} ranks out (--exclude '@{}$') or expose a GPU per rank "
                  "(CUDA_VISIBLE_DEVICES)",
                  shared, ranks.size(), ranks.size());
  }
  if (requested == CollectivesRequest::gloo || !shared.empty())
    choice.transport = CollectiveTransport::gloo_staged;
  // Gloo's staged path connects the ranks over loopback: one host only.
  if (const std::size_t r = rank_on_another_host(ranks);
      choice.transport == CollectiveTransport::gloo_staged && r != 0) {
    CPRR_THROW_AS(UsageError,
                  "{}: collectives would go through Gloo staged through host memory, which joins "
                  "the ranks of one host only, but rank 0 runs on {} and rank {} on {}: give "
                  "every rank a GPU of its own (fewer ranks per node) so that NCCL carries them{}",
                  shared.empty() ? "--collectives gloo" : shared, host_of(ranks[0].gpu), r,
                  host_of(ranks[r].gpu),
                  requested == CollectivesRequest::gloo ? ", or use --collectives auto" : "");
  }
  return choice;
}

CollectiveTransport local_transport(int world_size, int gpus, CollectivesRequest requested) {
  if (gpus <= 0) return CollectiveTransport::gloo;
  std::vector<RankDevice> ranks;
  for (int r = 0; r < world_size; ++r) {
    const int device = local_device(r, gpus);
    ranks.push_back({device, fmt::format("this host/GPU {}", device)});
  }
  return choose_transport(BackendKind::cuda, requested, ranks).transport;
}

std::string sharing_line(int world_size, int gpus, CollectivesRequest requested) {
  if (local_transport(world_size, gpus, requested) != CollectiveTransport::gloo_staged) return {};
  const bool shared = world_size > gpus;
  const int used = std::min(world_size, gpus);
  return fmt::format(
      "{} rank{} on {} GPU{}: collectives through Gloo, staged through host memory{}", world_size,
      world_size == 1 ? "" : "s", used, used == 1 ? "" : "s",
      shared ? "" : " (--collectives gloo)");
}

}  // namespace cprr
