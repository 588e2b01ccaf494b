#pragma once
// Crash-safe file output (ccache's AtomicFile): the bytes go to a temporary file in the target's
// directory, are fsynced, and replace the target by rename, so a reader sees the old file or the
// new one, never half of one. Errors name the command-line option the path came from.
#include <string>
#include <string_view>

namespace cprr {

/// Throws UsageError ("<option> PATH: ...", with the errno text) unless a file can be written at
/// `path`: the path names a file, not a directory, and its directory accepts a new file. Called
/// before long work, so a bad path is reported before anything is spent on it.
void check_file_target(std::string_view option, const std::string& path);

/// Writes `bytes` to `path` crash-safely (temp file in the same directory, fsync, rename, fsync of
/// the directory). An existing file keeps its mode; a new one is 0644. Throws UsageError naming
/// `option` and the path when it cannot; no temporary file is left behind.
void write_file_atomically(std::string_view option, const std::string& path,
                           std::string_view bytes);

}  // namespace cprr
