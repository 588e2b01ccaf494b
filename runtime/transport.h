#pragma once
// How a world's collectives travel, and what --collectives asks for: plain enums the whole way,
// from the option to the ranks and their Python side (python/native/rank_runtime.h, built as
// C++17 against another interpreter, includes this header alone).
#include <cstdint>
#include <string_view>

namespace cprr {

/// How a world's collectives travel: NCCL (cuda, a GPU per rank), Gloo with device buffers
/// staged through pinned host memory (cuda, ranks sharing a GPU: runtime/cuda_staged.h), or Gloo
/// on host memory (the cpu backend).
enum class CollectiveTransport : uint8_t { nccl, gloo_staged, gloo };
/// "nccl" | "gloo_staged" | "gloo": what the store, --json and cpreplay --list say.
constexpr std::string_view transport_name(CollectiveTransport t) {
  switch (t) {
    case CollectiveTransport::nccl:
      return "nccl";
    case CollectiveTransport::gloo_staged:
      return "gloo_staged";
    case CollectiveTransport::gloo:
      return "gloo";
  }
  return "?";
}

/// What --collectives asks for, parsed once (cli/cli_options.h) and carried as this value to the
/// controller, whose worlds turn it into their CollectiveTransport from what the ranks said
/// (runtime/transport_choice.h): automatic takes NCCL where every rank has a GPU of its
/// own; nccl insists on it; gloo stages a cuda world's collectives through host memory.
enum class CollectivesRequest : uint8_t { automatic, nccl, gloo };
/// "auto" | "nccl" | "gloo": the option's words, in messages.
constexpr std::string_view request_name(CollectivesRequest r) {
  switch (r) {
    case CollectivesRequest::automatic:
      return "auto";
    case CollectivesRequest::nccl:
      return "nccl";
    case CollectivesRequest::gloo:
      return "gloo";
  }
  return "?";
}

}  // namespace cprr
