// Which transport a world's collectives take, from its ranks' GPUs and --collectives.
#include "runtime/transport_choice.h"

#include <gtest/gtest.h>

#include "runtime/error.h"

namespace cprr {
namespace {

std::vector<RankDevice> on(std::initializer_list<int> devices) {
  std::vector<RankDevice> out;
  for (int d : devices) out.push_back({d, "host/GPU-" + std::to_string(d)});
  return out;
}

TEST(TransportChoice, AGpuPerRankIsNcclUnlessGlooIsAskedFor) {
  const TransportChoice c =
      choose_transport(BackendKind::cuda, CollectivesRequest::automatic, on({0, 1, 2, 3}));
  EXPECT_EQ(c.transport, CollectiveTransport::nccl);
  EXPECT_EQ(c.rank_gpus, "0,1,2,3");
  EXPECT_EQ(choose_transport(BackendKind::cuda, CollectivesRequest::nccl, on({0, 1})).transport,
            CollectiveTransport::nccl);
  EXPECT_EQ(choose_transport(BackendKind::cuda, CollectivesRequest::gloo, on({0, 1})).transport,
            CollectiveTransport::gloo_staged);
}

TEST(TransportChoice, RanksSharingAGpuGoThroughGlooStaged) {
  const TransportChoice c =
      choose_transport(BackendKind::cuda, CollectivesRequest::automatic, on({0, 0, 0, 0}));
  EXPECT_EQ(c.transport, CollectiveTransport::gloo_staged);
  EXPECT_EQ(c.rank_gpus, "0,0,0,0");
  // Two of three on one GPU is sharing too.
  EXPECT_EQ(
      choose_transport(BackendKind::cuda, CollectivesRequest::automatic, on({0, 1, 0})).transport,
      CollectiveTransport::gloo_staged);
}

TEST(TransportChoice, TheSameIndexOnTwoHostsIsNoSharing) {
  const std::vector<RankDevice> two_hosts{{0, "a/GPU-x"}, {0, "b/GPU-y"}};
  const TransportChoice c =
      choose_transport(BackendKind::cuda, CollectivesRequest::automatic, two_hosts);
  EXPECT_EQ(c.transport, CollectiveTransport::nccl);
  EXPECT_EQ(c.rank_gpus, "0,0");
}

TEST(TransportChoice, NcclWhereRanksShareAGpuIsRefusedNamingThem) {
  try {
    choose_transport(BackendKind::cuda, CollectivesRequest::nccl, on({0, 1, 1}));
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ranks 1 and 2 share GPU 1"), std::string::npos) << what;
    EXPECT_NE(what.find("--collectives auto"), std::string::npos) << what;
  }
}

// The staged path's Gloo connects over loopback: ranks sharing GPUs across hosts are refused.
TEST(TransportChoice, TheStagedPathAcrossHostsIsRefused) {
  const std::vector<RankDevice> two_hosts{{0, "a/GPU-x"}, {0, "a/GPU-x"}, {0, "b/GPU-y"}};
  try {
    choose_transport(BackendKind::cuda, CollectivesRequest::automatic, two_hosts);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 runs on a and rank 2 on b"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(choose_transport(BackendKind::cuda, CollectivesRequest::gloo,
                                {{0, "a/GPU-x"}, {0, "b/GPU-y"}}),
               UsageError);
}

// The cpu backend's Gloo binds loopback and its window is files every rank maps: its ranks name
// their host, and a world spread over two hosts is refused, naming both.
TEST(TransportChoice, TheCpuBackendAcrossHostsIsRefused) {
  try {
    choose_transport(BackendKind::cpu, CollectivesRequest::automatic,
                     {{-1, "a"}, {-1, "a"}, {-1, "b"}});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--backend cpu"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 0 runs on a and rank 2 on b"), std::string::npos) << what;
  }
  EXPECT_EQ(
      choose_transport(BackendKind::cpu, CollectivesRequest::automatic, {{-1, "a"}, {-1, "a"}})
          .transport,
      CollectiveTransport::gloo);
}

// --collectives nccl is refused before the run when the local worlds would share GPUs: by the
// decision the world makes from its hellos, over the GPUs its ranks will get (local_device).
TEST(TransportChoice, NcclThatCannotFitIsRefusedBeforeTheRun) {
  try {
    local_transport(4, 2, CollectivesRequest::nccl);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ranks 0 and 2 share GPU 0"), std::string::npos) << what;
    EXPECT_NE(what.find("--exclude '@4$'"), std::string::npos) << what;
  }
  EXPECT_EQ(local_transport(2, 2, CollectivesRequest::nccl), CollectiveTransport::nccl);
  EXPECT_EQ(local_transport(4, 1, CollectivesRequest::automatic), CollectiveTransport::gloo_staged);
  // No GPU: the cpu backend, whose own check refuses nccl.
  EXPECT_EQ(local_transport(4, 0, CollectivesRequest::nccl), CollectiveTransport::gloo);
}

TEST(TransportChoice, LocalRanksShareTheGpusRoundRobin) {
  EXPECT_EQ(local_device(0, 2), 0);
  EXPECT_EQ(local_device(3, 2), 1);
  EXPECT_EQ(local_device(5, 1), 0);
  // The prediction agrees with the decision over the hellos those ranks send.
  for (int gpus = 1; gpus <= 4; ++gpus) {
    for (int w = 1; w <= 8; ++w) {
      std::vector<int> devices;
      for (int r = 0; r < w; ++r) devices.push_back(local_device(r, gpus));
      std::vector<RankDevice> hellos;
      for (int d : devices) hellos.push_back({d, "host/GPU-" + std::to_string(d)});
      EXPECT_EQ(
          local_transport(w, gpus, CollectivesRequest::automatic),
          choose_transport(BackendKind::cuda, CollectivesRequest::automatic, hellos).transport)
          << w << " ranks on " << gpus << " GPUs";
    }
  }
}

TEST(BackendNames, RoundTripAndRejectWhatIsNoBackend) {
  for (BackendKind k : {BackendKind::cpu, BackendKind::cuda})
    EXPECT_EQ(parse_backend_kind(backend_name(k)), k);
  EXPECT_EQ(backend_name(BackendKind::cpu), "cpu");
  EXPECT_EQ(backend_name(BackendKind::cuda), "cuda");
  EXPECT_EQ(parse_backend_kind("auto"), std::nullopt) << "--backend's word, resolved before";
  EXPECT_EQ(parse_backend_kind("CUDA"), std::nullopt);
  EXPECT_EQ(parse_backend_kind(""), std::nullopt);
  EXPECT_EQ(resolve_backend("cpu"), BackendKind::cpu);
  EXPECT_THROW(resolve_backend("rocm"), UsageError);
}

TEST(TransportChoice, TheCpuBackendIsGlooWithNoGpus) {
  const TransportChoice c =
      choose_transport(BackendKind::cpu, CollectivesRequest::automatic, {{}, {}});
  EXPECT_EQ(c.transport, CollectiveTransport::gloo);
  EXPECT_EQ(c.rank_gpus, "");
  EXPECT_THROW(check_collectives(CollectivesRequest::nccl, BackendKind::cpu), UsageError);
  EXPECT_NO_THROW(check_collectives(CollectivesRequest::gloo, BackendKind::cpu));
}

TEST(TransportChoice, TheStartLineSaysWhenRanksShareGpus) {
  EXPECT_EQ(sharing_line(4, 1, CollectivesRequest::automatic),
            "4 ranks on 1 GPU: collectives through Gloo, staged through host memory");
  EXPECT_EQ(sharing_line(4, 2, CollectivesRequest::automatic),
            "4 ranks on 2 GPUs: collectives through Gloo, staged through host memory");
  EXPECT_EQ(sharing_line(2, 2, CollectivesRequest::automatic), "");
  EXPECT_EQ(sharing_line(1, 1, CollectivesRequest::automatic), "");
  EXPECT_NE(sharing_line(2, 2, CollectivesRequest::gloo).find("(--collectives gloo)"),
            std::string::npos);
  EXPECT_EQ(sharing_line(4, 0, CollectivesRequest::automatic), "");  // no GPU: the cpu backend
}

TEST(TransportChoice, TheLocalTransportFollowsTheGpuCountAndTheRequest) {
  EXPECT_EQ(local_transport(4, 1, CollectivesRequest::automatic), CollectiveTransport::gloo_staged);
  EXPECT_EQ(local_transport(2, 2, CollectivesRequest::automatic), CollectiveTransport::nccl);
  EXPECT_EQ(local_transport(2, 2, CollectivesRequest::gloo), CollectiveTransport::gloo_staged);
  EXPECT_EQ(local_transport(2, 0, CollectivesRequest::automatic), CollectiveTransport::gloo);
}

// The store, --json and cpreplay --list say the transport's name; messages say the option's word.
TEST(TransportChoice, NamesAreTheStoresAndTheOptionsWords) {
  EXPECT_EQ(transport_name(CollectiveTransport::nccl), "nccl");
  EXPECT_EQ(transport_name(CollectiveTransport::gloo_staged), "gloo_staged");
  EXPECT_EQ(transport_name(CollectiveTransport::gloo), "gloo");
  EXPECT_EQ(request_name(CollectivesRequest::automatic), "auto");
  EXPECT_EQ(request_name(CollectivesRequest::nccl), "nccl");
  EXPECT_EQ(request_name(CollectivesRequest::gloo), "gloo");
}

}  // namespace
}  // namespace cprr
