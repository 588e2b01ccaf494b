#include "recorder/api/case.h"

#include <fmt/format.h>

#include <algorithm>

namespace cprr {

void Registry::add_case(std::string name, CaseOptions options, CaseBody body, std::string where) {
  const bool bad_name = name.empty() || std::any_of(name.begin(), name.end(), [](char c) {
                          return c == ' ' || c == '\t' || c == '\n' || c == '{';
                        });
  if (bad_name) {
    errors_.push_back(fmt::format("case name '{}' is empty or has whitespace or '{{'", name));
  } else if (const RegisteredCase* first = find(name); first != nullptr) {
    errors_.push_back(
        first->where.empty() || where.empty()
            ? fmt::format("case '{}' is registered twice", name)
            : fmt::format("case '{}' is defined twice: at {} and at {}; give one of them another "
                          "name",
                          name, first->where, where));
  } else if (options.world_sizes.empty() ||
             std::any_of(options.world_sizes.begin(), options.world_sizes.end(),
                         [](int w) { return w < 1; })) {
    errors_.push_back(fmt::format("case '{}' needs world sizes >= 1", name));
  } else {
    cases_.push_back(
        RegisteredCase{CaseInfo{std::move(name), std::move(options)}, body, std::move(where)});
  }
}

const RegisteredCase* Registry::find(std::string_view name) const {
  for (const auto& c : cases_) {
    if (c.info.name == name) return &c;
  }
  return nullptr;
}

Registry& registry() {
  static Registry instance;
  return instance;
}

bool register_case(std::string name, CaseOptions options, CaseBody body,
                   std::source_location where) {
  const std::string_view file = where.file_name();
  const std::size_t slash = file.rfind('/');
  registry().add_case(
      std::move(name), std::move(options), body,
      fmt::format("{}:{}", slash == std::string_view::npos ? file : file.substr(slash + 1),
                  where.line()));
  return true;
}

bool register_reset_hook(Hook hook) {
  registry().add_reset_hook(hook);
  return true;
}

bool register_worker_init(Hook hook) {
  registry().add_worker_init(hook);
  return true;
}

}  // namespace cprr
