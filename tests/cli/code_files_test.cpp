// cli/code_files: a file's content hash, the run's code fingerprinted, and what changed since.
#include "cli/code_files.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace cprr {
namespace {

using ::testing::ElementsAre;
namespace fs = std::filesystem;

struct Folder {
  fs::path path = fs::temp_directory_path() / ("cprr-code-files-" + std::to_string(::getpid()));
  Folder() { fs::create_directories(path); }
  ~Folder() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

TEST(CodeFiles, AFilesHashIsTheXxh3OfItsWholeContentInHex) {
  const Folder f;
  // Over 64 KiB: read in more than one block.
  std::string big(200000, 'x');
  big[123456] = 'y';
  const std::string path = f.write("big.py", big);
  EXPECT_EQ(file_xxh3(path), fmt::format("{:016x}", XXH3_64bits(big.data(), big.size())));
  EXPECT_EQ(file_xxh3(f.write("empty.py", "")), fmt::format("{:016x}", XXH3_64bits("", 0)));
  EXPECT_EQ(file_xxh3((f.path / "missing.py").string()), std::nullopt);
  EXPECT_EQ(file_xxh3(f.path.string()), std::nullopt) << "a directory has no content to hash";
}

TEST(CodeFiles, NothingChangedSaysNothing) {
  const Folder f;
  const std::string a = f.write("test_a.py", "A"), w = f.write("worker", "ELF");
  EXPECT_THAT(code_changes(fingerprint({a, w}), w, 3), ElementsAre());
}

TEST(CodeFiles, AChangedOrMissingFileIsNamedAsACaseFileOrTheWorker) {
  const Folder f;
  const std::string a = f.write("test_a.py", "A"), b = f.write("test_b.py", "B"),
                    w = f.write("worker", "ELF");
  const std::vector<CodeFile> recorded = fingerprint({a, b, w});
  f.write("test_a.py", "A2");
  fs::remove(b);
  f.write("worker", "ELF2");
  EXPECT_THAT(code_changes(recorded, w, 3),
              ElementsAre("case file " + a +
                              " changed since run 3 was recorded (its content "
                              "differs)",
                          "case file " + b + " (recorded in run 3) no longer exists",
                          "worker " + w +
                              " changed since run 3 was recorded (its content "
                              "differs)"));
}

TEST(CodeFiles, AFileUnreadableWhenRecordedIsNotCompared) {
  const Folder f;
  const std::vector<CodeFile> recorded = fingerprint({(f.path / "later.py").string()});
  ASSERT_EQ(recorded.at(0).xxh3, "");
  f.write("later.py", "now it exists");
  EXPECT_THAT(code_changes(recorded, "", 1), ElementsAre());
}

}  // namespace
}  // namespace cprr
