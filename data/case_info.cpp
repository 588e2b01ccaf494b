#include "data/case_info.h"

#include <fmt/format.h>

namespace cprr {

std::string CaseInstance::label() const {
  std::string out = info.name;
  if (!params.empty()) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : params) {
      out += fmt::format("{}{}={}", first ? "" : ",", k, v);
      first = false;
    }
    out += '}';
  }
  return out + fmt::format("@{}", world_size);
}

}  // namespace cprr
