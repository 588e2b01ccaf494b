#include "recorder/cli_options.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "recorder/engine/controller.h"

namespace cprr {

CLI::Validator seconds_validator() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(in.c_str(), &end);
        if (in.empty() || end == nullptr || *end != '\0')
          return "must be a positive number of seconds";
        return timeout_problem(v);
      },
      "SECONDS");
}

CLI::Validator positive_count_validator() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(in.c_str(), &end, 10);
        if (in.empty() || *end != '\0' || errno == ERANGE || v < 1 || v > 1'000'000) {
          return "must be a whole number from 1 to 1000000";
        }
        return {};
      },
      "N");
}

void add_common_flags(CLI::App& app, std::string_view tool) {
  app.set_version_flag("--version", std::string(tool) + " " + CPRR_VERSION,
                       "print the version and exit");
  app.option_defaults()->always_capture_default();
}

}  // namespace cprr
