#pragma once
// cprecord's command line: its options in the order --help lists them, and what --help says
// after them.
#include <CLI/CLI.hpp>
#include <string>

#include "cli/cli_options.h"
#include "commands/record_command.h"

namespace cprr {

/// Adds every cprecord option to `app`, writing into `o` and `launch`.
void add_record_options(CLI::App& app, RecordOptions& o, LaunchFlags& launch);

/// --help's text after the options: the checks, exit codes, crash safety, progress, Ctrl-C.
std::string record_footer();

}  // namespace cprr
