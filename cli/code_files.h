#pragma once
// The run's code, fingerprinted when cprecord records it and checked when cpreplay replays it
// (data/code_file.h): which case file or worker binary changed, or is gone, since the record.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/code_file.h"

namespace cprr {

/// XXH3-64 of the file's content as 16 hex digits; nullopt when it cannot be read.
std::optional<std::string> file_xxh3(const std::string& path);

/// Each of `paths` with its content hash ("" for one that cannot be read).
std::vector<CodeFile> fingerprint(const std::vector<std::string>& paths);

/// One line per recorded file that is not as recorded: "case file F changed since run N was
/// recorded" (or "worker F", when F is `worker`), "... no longer exists"; empty when every file
/// is as recorded (a file unreadable at record time is not compared).
std::vector<std::string> code_changes(const std::vector<CodeFile>& recorded,
                                      const std::string& worker, int64_t run_id);

}  // namespace cprr
