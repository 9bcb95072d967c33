// Tests for WriteFileAtomically: the file appears whole, an existing file is replaced or kept as
// asked, the hooks run in their places, and no temporary file outlives a call.
#include "bdn/store/atomic_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace bdn {
namespace {
namespace fs = std::filesystem;

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class AtomicFileTest : public ::testing::Test {
 protected:
  AtomicFileTest() {
    std::string t = (fs::temp_directory_path() / "bdn_atomic_file_test.XXXXXX").string();
    dir_ = ::mkdtemp(t.data());
    fs::create_directories(dir_ / "tmp");
  }
  ~AtomicFileTest() override { fs::remove_all(dir_); }

  AtomicWriteOptions Options(ExistingFile existing = ExistingFile::kReplace) {
    return {.tmp_dir = dir_ / "tmp", .existing = existing};
  }
  bool TmpIsEmpty() const { return fs::is_empty(dir_ / "tmp"); }
  // Writes `text` to `p` and expects it there whole, with no temporary file left.
  void ExpectWritten(const fs::path& p, const std::string& text,
                     const AtomicWriteOptions& options) {
    auto r = WriteFileAtomically(p, Bytes(text), "file x", options);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(*r, WriteOutcome::kWritten);
    EXPECT_EQ(ReadFile(p), text);
    EXPECT_TRUE(TmpIsEmpty());
  }

  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesTheFileAndCreatesItsDirectory) {
  ExpectWritten(dir_ / "ab" / "file", "hello", Options());
}

TEST_F(AtomicFileTest, ReplaceOverwritesAnExistingFile) {
  ExpectWritten(dir_ / "file", "old", Options());
  ExpectWritten(dir_ / "file", "new", Options());
}

TEST_F(AtomicFileTest, KeepLeavesAnExistingFileAndSaysSo) {
  fs::path p = dir_ / "file";
  ExpectWritten(p, "first", Options(ExistingFile::kKeep));
  bool renamed = false;
  AtomicWriteOptions options = Options(ExistingFile::kKeep);
  options.before_rename = [&] { renamed = true; };
  auto r = WriteFileAtomically(p, Bytes("second"), "file x", options);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(*r, WriteOutcome::kAlreadyExisted);
  EXPECT_TRUE(renamed) << "the hook runs before the rename is tried";
  EXPECT_EQ(ReadFile(p), "first");
  EXPECT_TRUE(TmpIsEmpty());
}

TEST_F(AtomicFileTest, HooksRunInOrderWithTheFileComplete) {
  fs::path p = dir_ / "file";
  std::vector<std::string> calls;
  AtomicWriteOptions options = Options();
  options.before_close = [&](int fd) {
    calls.push_back("close:" + std::to_string(::lseek(fd, 0, SEEK_END)));
    EXPECT_FALSE(fs::exists(p)) << "not visible before the rename";
    return Status::Ok();
  };
  options.before_rename = [&] {
    calls.push_back("rename");
    EXPECT_FALSE(fs::exists(p));
  };
  ASSERT_TRUE(WriteFileAtomically(p, Bytes("12345"), "file x", options).has_value());
  EXPECT_EQ(calls, (std::vector<std::string>{"close:5", "rename"}));
}

TEST_F(AtomicFileTest, AFailingBeforeCloseFailsTheWriteAndLeavesNothing) {
  fs::path p = dir_ / "file";
  bool renamed = false;
  AtomicWriteOptions options = Options();
  options.before_close = [](int) { return InternalError("file x: set times: test"); };
  options.before_rename = [&] { renamed = true; };
  auto r = WriteFileAtomically(p, Bytes("data"), "file x", options);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(), "file x: set times: test");
  EXPECT_FALSE(renamed);
  EXPECT_FALSE(fs::exists(p));
  EXPECT_TRUE(TmpIsEmpty());
}

TEST_F(AtomicFileTest, AMissingTemporaryDirectoryIsACreateError) {
  AtomicWriteOptions options = Options();
  options.tmp_dir = dir_ / "absent";
  auto r = WriteFileAtomically(dir_ / "file", Bytes("data"), "file x", options);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_TRUE(
      r.error().message().starts_with("file x: create " + (dir_ / "absent").string() + "/file."))
      << r.error().message();
}

TEST_F(AtomicFileTest, ARenameFailureNamesTheFinalPath) {
  // The final path's grandparent does not exist: only one level is created.
  fs::path p = dir_ / "no" / "such" / "file";
  auto r = WriteFileAtomically(p, Bytes("data"), "file x", Options(ExistingFile::kKeep));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_TRUE(r.error().message().starts_with("file x: rename into " + p.string() + ": "))
      << r.error().message();
  EXPECT_TRUE(TmpIsEmpty());
}

}  // namespace
}  // namespace bdn
