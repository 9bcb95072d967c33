// DirFd, DirCursor and RemoveTree on a real temporary directory: paths beyond PATH_MAX, moves
// between subtrees, symlinks never followed, a moved directory detected, deep trees removed.
#include "bdn/base/dir_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace bdn {
namespace {
namespace fs = std::filesystem;

class DirFdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "bdn-dirfd-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    auto c = DirCursor::Open(root_.parent_path());
    ASSERT_TRUE(c.has_value());
    EXPECT_TRUE(RemoveTree(*c, root_.filename().string()).ok());
    EXPECT_FALSE(fs::exists(root_));
  }
  // Creates `name` (a directory) in the cursor's directory and enters it.
  static void MkdirDown(DirCursor& c, const std::string& name) {
    ASSERT_EQ(::mkdirat(c.fd(), name.c_str(), 0755), 0) << c.Display(name);
    ASSERT_TRUE(c.Down(name).ok());
  }
  static void WriteAt(int dir, const std::string& name, const std::string& text) {
    int fd = ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
  }
  static std::string ReadAt(int dir, const std::string& name) {
    int fd = ::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "<missing>";
    char buf[256];
    ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  }
  fs::path root_;
};

TEST_F(DirFdTest, CursorReachesPathsLongerThanPathMax) {
  auto c = DirCursor::Open(root_);
  ASSERT_TRUE(c.has_value());
  const std::string name(200, 'n');
  std::string rel;
  for (int i = 0; i < 25; ++i) {
    MkdirDown(*c, name + std::to_string(i % 10));
    rel += (rel.empty() ? "" : "/") + name + std::to_string(i % 10);
  }
  EXPECT_EQ(c->rel(), rel);
  EXPECT_GT(c->Display().size(), static_cast<size_t>(PATH_MAX));
  WriteAt(c->fd(), "leaf", "deep");
  ASSERT_TRUE(c->MoveTo("").ok());
  EXPECT_EQ(c->rel(), "");
  ASSERT_TRUE(c->MoveTo(rel).ok());
  EXPECT_EQ(ReadAt(c->fd(), "leaf"), "deep");
}

TEST_F(DirFdTest, MoveToGoesThroughTheCommonAncestor) {
  auto c = DirCursor::Open(root_);
  ASSERT_TRUE(c.has_value());
  for (std::string d : {"a", "a/b", "a/b/c", "a/bb", "a-b", "x"}) {
    ASSERT_EQ(::mkdirat(c->fd(), d.c_str(), 0755), 0) << d;
    WriteAt(c->fd(), d + "/marker", d);
  }
  for (std::string d : {"a/b/c", "a/bb", "a", "a-b", "a/b", "", "x", "a/b/c", "a/b/c", ""}) {
    ASSERT_TRUE(c->MoveTo(d).ok()) << d;
    EXPECT_EQ(c->rel(), d);
    EXPECT_EQ(ReadAt(c->fd(), "marker"), d.empty() ? "<missing>" : d);
  }
  EXPECT_EQ(c->Display("f"), (root_ / "f").string());
  ASSERT_TRUE(c->MoveTo("a/bb").ok());
  EXPECT_EQ(c->Display("f"), (root_ / "a/bb/f").string());
}

TEST_F(DirFdTest, DownNeverFollowsASymlinkOrEntersAFile) {
  ASSERT_EQ(::mkdir((root_ / "real").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("real", (root_ / "link").c_str()), 0);
  WriteAt(AT_FDCWD, (root_ / "file").string(), "x");
  auto c = DirCursor::Open(root_);
  ASSERT_TRUE(c.has_value());
  for (std::string name : {"link", "file"}) {
    Status s = c->Down(name);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(), "path \"" + (root_ / name).string() +
                               "\": not a directory (a symlink or file is in the way)");
    EXPECT_EQ(c->rel(), "");
  }
  EXPECT_EQ(c->Down("missing").code(), StatusCode::kNotFound);
  EXPECT_EQ(c->Up().code(), StatusCode::kInternal);
}

TEST_F(DirFdTest, UpDetectsADirectoryMovedMeanwhile) {
  ASSERT_EQ(::mkdir((root_ / "a").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root_ / "a/b").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root_ / "other").c_str(), 0755), 0);
  auto c = DirCursor::Open(root_);
  ASSERT_TRUE(c.has_value());
  ASSERT_TRUE(c->MoveTo("a/b").ok());
  ASSERT_EQ(::rename((root_ / "a/b").c_str(), (root_ / "other/b").c_str()), 0);
  Status s = c->Up();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "directory \"" + (root_ / "a/b").string() + "\": moved during the operation");
}

TEST_F(DirFdTest, ListNamesIsSortedBytewise) {
  for (std::string n : {"b", "a-b", "a", "\xc3\xbc", "A"})
    WriteAt(AT_FDCWD, (root_ / n).string(), n);
  auto d = DirFd::Open(root_);
  ASSERT_TRUE(d.has_value());
  auto names = ListNames(d->get(), root_.string());
  ASSERT_TRUE(names.has_value());
  EXPECT_EQ(*names, (std::vector<std::string>{"A", "a", "a-b", "b", "\xc3\xbc"}));
}

TEST_F(DirFdTest, RemoveTreeRemovesDeepTreesAndNeverFollowsSymlinks) {
  ASSERT_EQ(::mkdir((root_ / "outside").c_str(), 0755), 0);
  WriteAt(AT_FDCWD, (root_ / "outside/keep").string(), "keep");
  auto c = DirCursor::Open(root_);
  ASSERT_TRUE(c.has_value());
  MkdirDown(*c, "victim");
  for (int i = 0; i < 300; ++i) {
    WriteAt(c->fd(), "f", "x");
    ASSERT_EQ(::symlinkat("../../../../outside", c->fd(), "to-outside"), 0);
    ASSERT_EQ(::mkdirat(c->fd(), "side", 0755), 0);
    MkdirDown(*c, "d");
  }
  ASSERT_TRUE(c->MoveTo("").ok());
  ASSERT_TRUE(RemoveTree(*c, "victim").ok());
  EXPECT_EQ(c->rel(), "");
  EXPECT_FALSE(fs::exists(root_ / "victim"));
  EXPECT_EQ(ReadAt(c->fd(), "outside/keep"), "keep");
  EXPECT_TRUE(RemoveTree(*c, "victim").ok());  // already gone
  WriteAt(c->fd(), "plain", "x");
  EXPECT_TRUE(RemoveTree(*c, "plain").ok());
  EXPECT_FALSE(fs::exists(root_ / "plain"));
}

}  // namespace
}  // namespace bdn
