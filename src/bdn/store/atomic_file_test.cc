// Tests for WriteFileAtomically and AtomicFileWriter: the file appears whole with the mode asked
// for, an existing file is replaced or kept as asked, a fixed temporary name is reused, a file
// can stay open once named, and no temporary file outlives a call.
#include "bdn/store/atomic_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"

namespace bdn {
namespace {
namespace fs = std::filesystem;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

unsigned ModeOf(const fs::path& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

class AtomicFileTest : public ::testing::Test {
 protected:
  AtomicFileTest() { fs::create_directories(dir_.path() / "tmp"); }

  const fs::path& dir() const { return dir_.path(); }
  AtomicWriteOptions Options(ExistingFile existing = ExistingFile::kReplace) {
    return {.tmp_dir = dir() / "tmp", .existing = existing};
  }
  bool TmpIsEmpty() const { return fs::is_empty(dir() / "tmp"); }
  // Writes `text` to `p` and expects it there whole, with no temporary file left.
  void ExpectWritten(const fs::path& p, const std::string& text,
                     const AtomicWriteOptions& options) {
    auto r = WriteFileAtomically(p, AsBytes(text), "file x", options);
    ASSERT_OK(r);
    EXPECT_EQ(*r, WriteOutcome::kWritten);
    EXPECT_EQ(ReadFile(p), text);
    EXPECT_TRUE(TmpIsEmpty());
  }

  testutil::TempDir dir_{"bdn_atomic_file_test"};
};

TEST_F(AtomicFileTest, WritesTheFilePrivateByDefault) {
  const mode_t old = ::umask(0);
  ExpectWritten(dir() / "file", "hello", Options());
  ::umask(old);
  EXPECT_EQ(ModeOf(dir() / "file"), 0600u);
}

TEST_F(AtomicFileTest, TheModeIsExactlyTheOneAskedForWhateverTheUmask) {
  AtomicWriteOptions options = Options();
  options.mode = 0644;
  const mode_t old = ::umask(077);
  ExpectWritten(dir() / "config", "x = 1\n", options);
  ::umask(old);
  EXPECT_EQ(ModeOf(dir() / "config"), 0644u);
}

TEST_F(AtomicFileTest, ReplaceOverwritesAnExistingFile) {
  ExpectWritten(dir() / "file", "old", Options());
  ExpectWritten(dir() / "file", "new", Options());
}

TEST_F(AtomicFileTest, KeepLeavesAnExistingFileAndSaysSo) {
  fs::path p = dir() / "file";
  ExpectWritten(p, "first", Options(ExistingFile::kKeep));
  auto r = WriteFileAtomically(p, AsBytes("second"), "file x", Options(ExistingFile::kKeep));
  ASSERT_OK(r);
  EXPECT_EQ(*r, WriteOutcome::kAlreadyExisted);
  EXPECT_EQ(ReadFile(p), "first");
  EXPECT_TRUE(TmpIsEmpty());
}

TEST_F(AtomicFileTest, WithoutATemporaryDirectoryTheTemporaryFileSitsBesideTheFinalOne) {
  AtomicWriteOptions options;
  options.sync = FileSync::kAll;
  auto w = AtomicFileWriter::Create(dir() / "token", "admin token", options);
  ASSERT_OK(w);
  EXPECT_EQ(w->tmp_path().parent_path(), dir());
  EXPECT_TRUE(
      w->tmp_path().filename().string().starts_with("token." + std::to_string(::getpid()) + "."))
      << w->tmp_path();
  ASSERT_OK(w->Append(AsBytes("secret\n")));
  EXPECT_FALSE(fs::exists(dir() / "token")) << "not visible before the commit";
  auto r = w->Commit();
  ASSERT_OK(r);
  EXPECT_EQ(ReadFile(dir() / "token"), "secret\n");
  EXPECT_EQ(std::vector<fs::path>(fs::directory_iterator(dir()), {}).size(), 2u);  // tmp/, token
}

TEST_F(AtomicFileTest, AFixedTemporaryNameLeftByADeadWriterIsReused) {
  AtomicWriteOptions options = Options();
  options.tmp_name = ".doomed.tmp";
  options.sync = FileSync::kData;
  {
    std::ofstream stale(dir() / "tmp" / ".doomed.tmp");
    stale << "a killed writer's half-written bytes, longer than the new ones";
  }
  ExpectWritten(dir() / "doomed", "0000000000000001\n", options);
}

// bdn mounts lock, run as root, wrote through a symlink planted at its fixed temporary name
// (opened O_CREAT|O_TRUNC) into any file the symlink named.
TEST_F(AtomicFileTest, ASymlinkAtTheTemporaryNameIsNeverWrittenThrough) {
  {
    std::ofstream victim(dir() / "victim");
    victim << "keep";
  }
  fs::create_symlink(dir() / "victim", dir() / "tmp" / "file.tmp");
  AtomicWriteOptions options = Options();
  options.tmp_name = "file.tmp";
  auto r = WriteFileAtomically(dir() / "file", AsBytes("data"), "file x", options);
  EXPECT_STATUS(r, kInternal,
                "file x: create " + (dir() / "tmp" / "file.tmp").string() +
                    ": Too many levels of symbolic links");
  EXPECT_EQ(ReadFile(dir() / "victim"), "keep");
  EXPECT_FALSE(fs::exists(dir() / "file"));
  EXPECT_TRUE(fs::is_symlink(dir() / "tmp" / "file.tmp"));
}

// A unique temporary name ends in 16 random hex digits: nobody can create it first.
TEST_F(AtomicFileTest, AUniqueTemporaryNameCannotBeGuessed) {
  auto a = AtomicFileWriter::Create(dir() / "file", "file x", Options());
  auto b = AtomicFileWriter::Create(dir() / "file", "file x", Options());
  ASSERT_OK(a);
  ASSERT_OK(b);
  const std::string prefix = "file." + std::to_string(::getpid()) + ".";
  for (const auto* w : {&*a, &*b}) {
    std::string name = w->tmp_path().filename().string();
    ASSERT_TRUE(name.starts_with(prefix)) << name;
    std::string rest = name.substr(prefix.size());
    size_t dot = rest.find('.');
    ASSERT_NE(dot, std::string::npos) << name;
    EXPECT_EQ(rest.size() - dot - 1, 16u) << name;
  }
  auto random_part = [](const AtomicFileWriter& w) {
    std::string name = w.tmp_path().filename().string();
    return name.substr(name.size() - 16);
  };
  EXPECT_NE(random_part(*a), random_part(*b));
}

TEST_F(AtomicFileTest, AnAbandonedWriterLeavesNothing) {
  {
    auto w = AtomicFileWriter::Create(dir() / "file", "file x", Options());
    ASSERT_OK(w);
    ASSERT_OK(w->Append(AsBytes("part")));
    EXPECT_FALSE(TmpIsEmpty());
  }
  EXPECT_TRUE(TmpIsEmpty());
  EXPECT_FALSE(fs::exists(dir() / "file"));
}

// From an attacking helper: each `bdn mounts lock` killed mid-write left
// "config.yaml.<pid>.0.<hex>" beside the config, and they piled up. The next write removes those of
// writers that are gone.
TEST_F(AtomicFileTest, TheNextWriteRemovesTheTemporariesOfKilledWriters) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(child, ::waitpid(child, nullptr, 0));  // a pid that is gone
  const fs::path tmp = dir() / "tmp";
  auto plant = [&](const std::string& name, int age_seconds) {
    std::ofstream(tmp / name) << "half";
    const auto when = fs::file_time_type::clock::now() - std::chrono::seconds(age_seconds);
    fs::last_write_time(tmp / name, when);
  };
  const std::string gone = std::to_string(child);
  const std::string alive = std::to_string(::getpid());
  plant("cfg.yaml." + gone + ".0.0123456789abcdef", 120);   // removed
  plant("cfg.yaml." + gone + ".7.fedcba9876543210", 3600);  // removed
  plant("cfg.yaml." + gone + ".1.0123456789abcdef", 1);     // too young: kept
  plant("cfg.yaml." + alive + ".2.0123456789abcdef", 120);  // its writer lives: kept
  plant("cfg.yaml." + gone + ".3.0123456789ABCDEF", 120);   // not bdn's name: kept
  plant("cfg.yaml." + gone + ".3.0123456789abcdef.x", 120);
  plant("cfg.yaml.0" + gone + ".4.0123456789abcdef", 120);  // a pid as bdn never writes it
  plant("other.yaml." + gone + ".0.0123456789abcdef", 120);
  plant("cfg.yaml", 120);
  ASSERT_OK(WriteFileAtomically(dir() / "cfg.yaml", AsBytes("new"), "cfg", Options()));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  std::vector<std::string> kept{
      "cfg.yaml",
      "cfg.yaml." + gone + ".1.0123456789abcdef",
      "cfg.yaml." + gone + ".3.0123456789ABCDEF",
      "cfg.yaml." + gone + ".3.0123456789abcdef.x",
      "cfg.yaml.0" + gone + ".4.0123456789abcdef",
      "cfg.yaml." + alive + ".2.0123456789abcdef",
      "other.yaml." + gone + ".0.0123456789abcdef",
  };
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(left, kept);
  EXPECT_EQ("new", ReadFile(dir() / "cfg.yaml"));
}

TEST_F(AtomicFileTest, CommitKeepingOpenNamesTheFileAndKeepsWritingToIt) {
  AtomicWriteOptions options = Options();
  options.tmp_name = "123-ab.new";
  auto w = AtomicFileWriter::Create(dir() / "123-ab.claims", "gc claims", options);
  ASSERT_OK(w);
  ASSERT_EQ(::flock(w->fd(), LOCK_SH), 0);  // what the claims log does before naming it
  auto fd = w->CommitKeepingOpen();
  ASSERT_OK(fd);
  EXPECT_EQ(w->fd(), -1);
  EXPECT_TRUE(fs::exists(dir() / "123-ab.claims"));
  EXPECT_TRUE(TmpIsEmpty());
  ASSERT_OK(WriteAll(fd->get(), AsBytes("id1"), "claims"));
  ASSERT_OK(WriteAll(fd->get(), AsBytes("id2"), "claims"));
  EXPECT_EQ(ReadFile(dir() / "123-ab.claims"), "id1id2");
  // The lock taken before the rename is still held on the named file.
  UniqueFd other(::open((dir() / "123-ab.claims").c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_NE(::flock(other.get(), LOCK_EX | LOCK_NB), 0);
  EXPECT_STATUS(w->Commit(), kInternal, "gc claims: commit after a failed write or commit");
}

TEST_F(AtomicFileTest, AMissingTemporaryDirectoryIsACreateError) {
  AtomicWriteOptions options = Options();
  options.tmp_dir = dir() / "absent";
  auto r = WriteFileAtomically(dir() / "file", AsBytes("data"), "file x", options);
  EXPECT_STATUS(r, kNotFound, "file x: create " + (dir() / "absent").string() + "/file.");
}

TEST_F(AtomicFileTest, ARenameFailureNamesTheFinalPath) {
  fs::path p = dir() / "no" / "such" / "file";
  for (ExistingFile existing : {ExistingFile::kReplace, ExistingFile::kKeep}) {
    auto r = WriteFileAtomically(p, AsBytes("data"), "file x", Options(existing));
    EXPECT_STATUS(r, kNotFound, "file x: rename into " + p.string() + ": ");
    EXPECT_TRUE(TmpIsEmpty());
  }
}

}  // namespace
}  // namespace bdn
