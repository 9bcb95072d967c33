// Private directories and files: another user's directory refused, symlinks and FIFOs inside a
// private directory never followed nor waited on.
#include "bdn/base/private_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace bdn {
namespace {
namespace fs = std::filesystem;

class PrivateFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "bdn-private-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  // A uid that is not ours (root only can give a directory away).
  static uid_t OtherUid() { return ::geteuid() == 0 ? 65534 : ::geteuid(); }
  static std::string UidText(uid_t uid) {
    std::string s = "uid " + std::to_string(uid);
    if (struct passwd* pw = ::getpwuid(uid)) s += " (" + std::string(pw->pw_name) + ")";
    return s;
  }
  fs::path root_;
};

TEST_F(PrivateFilesTest, CreatePrivateDirectoryRefusesAnotherUsersDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  const fs::path dir = root_ / "cache";
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  ASSERT_EQ(::chown(dir.c_str(), OtherUid(), OtherUid()), 0);
  Status s = CreatePrivateDirectory(dir, "node cache");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "node cache " + dir.string() + ": owned by " + UidText(OtherUid()) +
                             ", not by this user (uid 0); use a directory of your own");
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u) << "left as it was";
  // The directory of a file the user named may be anybody's.
  EXPECT_TRUE(CreatePrivateDirectory(dir, "log directory", DirOwner::kAnyone).ok());
  EXPECT_FALSE(OpenPrivateDirectory(dir, "node cache").has_value());
}

TEST_F(PrivateFilesTest, CreatePrivateDirectoryAcceptsOwnDirectory) {
  const fs::path dir = root_ / "mine";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  EXPECT_TRUE(CreatePrivateDirectory(dir, "node cache").ok());
  EXPECT_TRUE(OpenPrivateDirectory(root_ / "new" / "deeper", "node cache").has_value());
}

TEST_F(PrivateFilesTest, OpenPrivateSubdirectoryNeverFollowsASymlink) {
  auto top = OpenPrivateDirectory(root_ / "cache", "node cache");
  ASSERT_TRUE(top.has_value());
  const fs::path elsewhere = root_ / "elsewhere";
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0700), 0);
  fs::create_directory_symlink(elsewhere, root_ / "cache" / "packs");
  auto sub = OpenPrivateSubdirectory(top->get(), "packs", root_ / "cache" / "packs", "node cache");
  ASSERT_FALSE(sub.has_value());
  EXPECT_EQ(sub.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(sub.error().message(),
            "node cache " + (root_ / "cache" / "packs").string() +
                ": not a directory (a symlink or file is in the way); move it away");
  // A missing one is created 0700; an existing one is tightened.
  auto made = OpenPrivateSubdirectory(top->get(), "index", root_ / "cache" / "index", "node cache");
  ASSERT_TRUE(made.has_value());
  struct stat st;
  ASSERT_EQ(::fstat(made->get(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(PrivateFilesTest, OpenPrivateSubdirectoryRefusesAnotherUsersDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  auto top = OpenPrivateDirectory(root_ / "cache", "node cache");
  ASSERT_TRUE(top.has_value());
  const fs::path packs = root_ / "cache" / "packs";
  ASSERT_EQ(::mkdir(packs.c_str(), 0700), 0);
  ASSERT_EQ(::chown(packs.c_str(), OtherUid(), OtherUid()), 0);
  auto sub = OpenPrivateSubdirectory(top->get(), "packs", packs, "node cache");
  ASSERT_FALSE(sub.has_value());
  EXPECT_EQ(sub.error().message(), "node cache " + packs.string() + ": owned by " +
                                       UidText(OtherUid()) +
                                       ", not by this user (uid 0); use a directory of your own");
}

TEST_F(PrivateFilesTest, OpenRegularFileAtRefusesSymlinksAndFifosWithoutBlocking) {
  auto dir = OpenPrivateDirectory(root_, "node cache");
  ASSERT_TRUE(dir.has_value());
  const std::string victim = (root_ / "victim").string();
  { std::ofstream(victim) << "root only\n"; }
  ASSERT_EQ(::symlink(victim.c_str(), (root_ / "quarantine").c_str()), 0);
  ASSERT_EQ(::mkfifo((root_ / "fifo").c_str(), 0600), 0);
  const std::string refused =
      ": not a regular file (a symlink, FIFO, directory or device is in the way)";
  for (int flags : {O_RDONLY, O_WRONLY | O_APPEND | O_CREAT, O_RDWR | O_CREAT}) {
    for (const std::string name : {"quarantine", "fifo"}) {
      auto fd = OpenRegularFileAt(dir->get(), name, flags, "node cache " + name);
      ASSERT_FALSE(fd.has_value()) << name << " " << flags;
      EXPECT_EQ(fd.error().code(), StatusCode::kFailedPrecondition);
      EXPECT_EQ(fd.error().message(), "node cache " + name + refused);
    }
  }
  std::string text;
  std::getline(std::ifstream(victim), text);
  EXPECT_EQ(text, "root only");
  auto missing = OpenRegularFileAt(dir->get(), "missing", O_RDONLY, "node cache missing");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
  auto made = OpenRegularFileAt(dir->get(), "evict.lock", O_RDWR | O_CREAT, "lock");
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(::fcntl(made->get(), F_GETFL) & O_NONBLOCK, 0);
}

}  // namespace
}  // namespace bdn
