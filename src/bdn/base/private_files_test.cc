// Private directories and files: another user's directory refused, symlinks and FIFOs inside a
// private directory never followed nor waited on; what another user planted in a directory open
// to others, another user's symlink on the path and a directory above it another user may change
// refused.
#include "bdn/base/private_files.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
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
  EXPECT_FALSE(OpenPrivateDirectory(dir, "node cache").has_value());
}

// From a tester: `bdn serve --log-file /tmp/x.log` as root changed /tmp to mode 1700 (the log
// directory was tightened like a store), and a log file at /dev/null made /dev/null 0600.
TEST_F(PrivateFilesTest, TheDirectoryOfALogFileIsNeverTightened) {
  const fs::path shared = root_ / "tmp";
  ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  ASSERT_TRUE(OpenLogFile(shared / "new.log").has_value());
  struct stat st;
  ASSERT_EQ(::stat(shared.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u);
  ASSERT_EQ(::stat((shared / "new.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // One it creates is 0700.
  ASSERT_TRUE(OpenLogFile(shared / "logs" / "x.log").has_value());
  ASSERT_EQ(::stat((shared / "logs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  // A device is not touched, and written to; a file of this user's is tightened, and appended to.
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  const unsigned null_mode = st.st_mode & 07777;
  auto null = OpenLogFile("/dev/null");
  ASSERT_TRUE(null.has_value()) << null.error().ToString();
  EXPECT_EQ(::write(null->get(), "x\n", 2), 2);
  MakePrivate("/dev/null", "log file");
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_EQ(st.st_mode & 07777, null_mode);
  { std::ofstream(shared / "x.log") << "old\n"; }
  ASSERT_EQ(::chmod((shared / "x.log").c_str(), 0644), 0);
  auto log = OpenLogFile(shared / "x.log");
  ASSERT_TRUE(log.has_value()) << log.error().ToString();
  ASSERT_EQ(::stat((shared / "x.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(::write(log->get(), "new\n", 4), 4);
  std::ifstream in(shared / "x.log");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "old\nnew\n");
}

// From an attacking helper: `--log-file /dev/stderr` under a pipe (`| tee`, a container's log
// capture) failed, "No such file or directory": /proc's link was followed as a path and read
// "pipe:[N]". A descriptor this process was given is used as it is.
TEST_F(PrivateFilesTest, ALogFileNamingADescriptorOfThisProcessUsesIt) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd read_end(p[0]), write_end(p[1]);
  // Standard output was open when the test started: put the pipe there, as a shell's `| tee` does.
  fflush(stdout);
  UniqueFd saved_stdout(::dup(STDOUT_FILENO));
  ASSERT_TRUE(saved_stdout);
  ASSERT_EQ(::dup2(write_end.get(), STDOUT_FILENO), STDOUT_FILENO);
  for (const char* path : {"/proc/self/fd/1", "/dev/fd/1", "/dev/stdout"}) {
    auto fd = OpenLogFile(path);
    ASSERT_TRUE(fd.has_value()) << fd.error().ToString();
    EXPECT_NE(fd->get(), STDOUT_FILENO);
    ASSERT_EQ(::write(fd->get(), "x\n", 2), 2);
    char got[2];
    ASSERT_EQ(::read(read_end.get(), got, 2), 2);
    EXPECT_EQ(std::string(got, 2), "x\n") << path;
  }
  ASSERT_EQ(::dup2(saved_stdout.get(), STDOUT_FILENO), STDOUT_FILENO);
}

// From an attacking helper: `volume mount --log-file /dev/fd/7`, 7 not opened by the shell, used
// whatever bdn had open as 7 by then (the store's gc/ directory), so every line was lost; a
// writable file of bdn's there would have had log lines written into it. Only a descriptor the
// process started with is taken.
TEST_F(PrivateFilesTest, ALogFileNamingADescriptorOpenedSinceStartIsRefused) {
  UniqueFd own(::open((root_ / "own.db").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(own);
  const std::string n = std::to_string(own.get());
  for (const std::string& path : {"/proc/self/fd/" + n, "/dev/fd/" + n}) {
    auto fd = OpenLogFile(path);
    ASSERT_FALSE(fd.has_value()) << path;
    EXPECT_EQ(fd.error().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(fd.error().message(), "log file " + path + ": descriptor " + n +
                                        " was not open when bdn started (open it in the shell, "
                                        "e.g. 9>>bdn.log, or give a file)");
  }
  // From an attacking helper: other names of the same link, followed as paths, reach the same
  // file (the mount daemon's log went into a pack of the store): refused by what was opened.
  fs::create_symlink("/dev/fd/" + n, root_ / "to-fd");
  for (const std::string& path :
       {"/proc/thread-self/fd/" + n, "/proc/" + std::to_string(::getpid()) + "/fd/" + n,
        (root_ / "to-fd").string(), (root_ / "own.db").string()}) {
    auto fd = OpenLogFile(path);
    ASSERT_FALSE(fd.has_value()) << path;
    EXPECT_EQ(fd.error().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(fd.error().message(), "log file " + path +
                                        ": it is a file bdn itself has open (descriptor " + n +
                                        "), not a log file; give a file of its own");
  }
  EXPECT_EQ(fs::file_size(root_ / "own.db"), 0u) << "nothing was written to the file";
  auto closed = OpenLogFile("/dev/fd/987");
  ASSERT_FALSE(closed.has_value());
  EXPECT_EQ(closed.error().message(),
            "log file /dev/fd/987: descriptor 987 was not open when bdn started (open it in the "
            "shell, e.g. 9>>bdn.log, or give a file)");
}

// From an attacking helper: a FIFO at the log path (another user's, in /tmp) was accepted, so
// root's log went to that user's reader, or `bdn serve` blocked in its open with no message.
TEST_F(PrivateFilesTest, ALogFileThatIsAFifoIsRefusedWithoutBlocking) {
  const fs::path fifo = root_ / "f.log";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  const std::string refused = "log file " + fifo.string() +
                              ": a FIFO is in the way (a log file is a regular file, or a "
                              "character device such as /dev/null)";
  auto no_reader = OpenLogFile(fifo);
  ASSERT_FALSE(no_reader.has_value());
  EXPECT_EQ(no_reader.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(no_reader.error().message(), refused);
  // With a reader the open itself succeeds; what it opened is refused all the same.
  UniqueFd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(reader);
  auto with_reader = OpenLogFile(fifo);
  ASSERT_FALSE(with_reader.has_value());
  EXPECT_EQ(with_reader.error().message(), refused);
  char c;
  EXPECT_EQ(::read(reader.get(), &c, 1), 0) << "nothing was written to the FIFO";
  // A directory and a socket likewise.
  ASSERT_EQ(::mkdir((root_ / "d.log").c_str(), 0700), 0);
  auto dir = OpenLogFile(root_ / "d.log");
  ASSERT_FALSE(dir.has_value());
  EXPECT_EQ(dir.error().message(), "log file " + (root_ / "d.log").string() +
                                       ": a directory is in the way (a log file is a regular "
                                       "file, or a character device such as /dev/null)");
}

// From an attacking helper: `bdn serve --log-file /tmp/m/sub/rc` as root, with /tmp/m mallory's:
// the directory was accepted whoever owned it, then the file opened again by its path, so
// swapping `sub` for a symlink meanwhile had root chmod and append to a file of root's elsewhere.
// A directory another user owns or may change, the file's own or one above it, is refused.
TEST_F(PrivateFilesTest, ALogFileInADirectoryAnotherUserMayChangeIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  const fs::path theirs = root_ / "m";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), OtherUid(), OtherUid()), 0);
  const std::string owned = ", a directory above it, is owned by " + UidText(OtherUid()) +
                            ", not by this user (uid 0) or root, who could replace what is in "
                            "it; use a directory of your own";
  for (const fs::path& file : {theirs / "rc", theirs / "sub" / "rc"}) {
    auto fd = OpenLogFile(file);
    ASSERT_FALSE(fd.has_value()) << file;
    EXPECT_EQ(fd.error().code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(fd.error().message(), "log file " + file.string() + ": " + theirs.string() + owned);
  }
  EXPECT_FALSE(fs::exists(theirs / "rc"));
  EXPECT_FALSE(fs::exists(theirs / "sub"));
  // Root's own directory that others may write, without the sticky bit.
  const fs::path shared = root_ / "shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  auto fd = OpenLogFile(shared / "x.log");
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().message(), "log file " + (shared / "x.log").string() + ": " +
                                      shared.string() +
                                      ", a directory above it, is writable by other users (mode "
                                      "0777, no sticky bit), who could replace what is in it; use "
                                      "a directory of your own");
  EXPECT_FALSE(fs::exists(shared / "x.log"));
}

// What another user may put at the name of a log file in a sticky directory (/tmp): a file of
// theirs, a symlink of theirs, a hard link to a file of this user's elsewhere (with
// fs.protected_hardlinks off). None is opened for writing, chmodded or appended to.
TEST_F(PrivateFilesTest, WhatAnotherUserPutAtALogFilesNameIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give files to another user";
  const fs::path sticky = root_ / "stick";
  ASSERT_EQ(::mkdir(sticky.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  const fs::path victim = root_ / "victim";
  { std::ofstream(victim) << "root only\n"; }
  ASSERT_EQ(::chmod(victim.c_str(), 0644), 0);
  const fs::path link = sticky / "link.log";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  ASSERT_EQ(::lchown(link.c_str(), OtherUid(), OtherUid()), 0);
  auto fd = OpenLogFile(link);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(fd.error().message(), "log file " + link.string() + ": " + link.string() +
                                      " is a symlink owned by " + UidText(OtherUid()) +
                                      ", not by this user (uid 0) or root; use a path of your own");
  const fs::path hard = sticky / "hard.log";
  ASSERT_EQ(::link(victim.c_str(), hard.c_str()), 0);
  fd = OpenLogFile(hard);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().message(), "log file " + hard.string() +
                                      ": a file with 2 hard links (it may be a link to a file "
                                      "elsewhere); give a file of its own");
  const fs::path theirs = sticky / "theirs.log";
  { std::ofstream(theirs) << "mallory's\n"; }
  ASSERT_EQ(::chown(theirs.c_str(), OtherUid(), OtherUid()), 0);
  fd = OpenLogFile(theirs);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().message(), "log file " + theirs.string() + ": owned by " +
                                      UidText(OtherUid()) +
                                      ", not by this user (uid 0); use a directory of your own");
  struct stat st;
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_size, 10) << "nothing appended";
  // Root's own symlink is followed, its target judged as the path named.
  ASSERT_EQ(::lchown(link.c_str(), 0, 0), 0);
  ASSERT_EQ(::unlink(hard.c_str()), 0);
  fd = OpenLogFile(link);
  ASSERT_TRUE(fd.has_value()) << fd.error().ToString();
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// From an attacking helper: a BDN_HOME of root's left mode 0777 was only tightened, and the
// registry.db symlink mallory had planted in it was then followed (root created its registry
// where mallory pointed); a file of mallory's there was used as the registry.
// A hard link to a file of this user's elsewhere, planted while the directory was open: owned
// by this user, it passed the owner check, and the registry chmodded the linked file (with
// fs.protected_hardlinks off, another user may link any file they can name).
TEST_F(PrivateFilesTest, AHardLinkPlantedInADirectoryOpenToOthersIsRefused) {
  const fs::path home = root_ / "home";
  const fs::path victim = root_ / "victim";
  { std::ofstream(victim) << "elsewhere\n"; }
  ASSERT_EQ(::chmod(victim.c_str(), 0644), 0);
  ASSERT_EQ(::mkdir(home.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(home.c_str(), 0777), 0);
  ASSERT_EQ(::link(victim.c_str(), (home / "registry.db").c_str()), 0);
  Status s = CreatePrivateDirectory(home, "BDN_HOME");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "BDN_HOME " + (home / "registry.db").string() +
                             ": a file with 2 hard links, put there while the directory was open "
                             "to other users (it may be a link to a file elsewhere); move it away");
  struct stat st;
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u) << "the linked file is left as it was";
}

// The directory of a log file is walked as the kernel would, except that another user's
// symlink is not followed anywhere on it (it decided where root's log was created and appended).
TEST_F(PrivateFilesTest, TheDirectoryOfALogFileIsNotReachedThroughAnotherUsersSymlink) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a symlink to another user";
  const fs::path sticky = root_ / "stick";
  const fs::path target = root_ / "rootdir";
  ASSERT_EQ(::mkdir(sticky.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(target.c_str(), (sticky / "logs").c_str()), 0);
  ASSERT_EQ(::lchown((sticky / "logs").c_str(), OtherUid(), OtherUid()), 0);
  const fs::path file = sticky / "logs" / "deeper" / "x.log";
  auto fd = OpenLogFile(file);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(fd.error().message(), "log file " + file.string() + ": " + (sticky / "logs").string() +
                                      " is a symlink owned by " + UidText(OtherUid()) +
                                      ", not by this user (uid 0) or root; use a path of your own");
  EXPECT_FALSE(fs::exists(target / "deeper"));
  // Root's own link is followed as before.
  ASSERT_EQ(::lchown((sticky / "logs").c_str(), 0, 0), 0);
  EXPECT_TRUE(OpenLogFile(file).has_value());
  EXPECT_TRUE(fs::is_regular_file(target / "deeper" / "x.log"));
}

TEST_F(PrivateFilesTest, WhatAnotherUserPlantedInADirectoryOpenToOthersIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to plant another user's files";
  const fs::path home = root_ / "home";
  const fs::path victim = root_ / "victim";
  { std::ofstream(victim) << "root only\n"; }
  ASSERT_EQ(::mkdir(home.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(home.c_str(), 0777), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (home / "registry.db").c_str()), 0);
  ASSERT_EQ(::lchown((home / "registry.db").c_str(), OtherUid(), OtherUid()), 0);
  Status s = CreatePrivateDirectory(home, "BDN_HOME");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "BDN_HOME " + (home / "registry.db").string() + ": a symlink owned by " +
                             UidText(OtherUid()) +
                             ", not by this user (uid 0); use a directory of your own");
  struct stat st;
  ASSERT_EQ(::stat(home.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "tightened first, so that nothing more is planted";
  // Once tightened it is not looked through again; the file checks refuse the link by name.
  EXPECT_EQ(MakeDatabasePrivate(home / "registry.db", "registry").message(),
            "registry " + (home / "registry.db").string() + ": a symlink owned by " +
                UidText(OtherUid()) + ", not by this user (uid 0); use a directory of your own");
  std::string text;
  std::getline(std::ifstream(victim), text);
  EXPECT_EQ(text, "root only");
  ASSERT_EQ(::unlink((home / "registry.db").c_str()), 0);

  // A file, deeper down, in a subdirectory that is this user's: found all the same.
  ASSERT_EQ(::mkdir((home / "store").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((home / "store").c_str(), 0777), 0);
  ASSERT_EQ(::mkdir((home / "store" / "packs").c_str(), 0700), 0);
  const fs::path planted = home / "store" / "packs" / "0000000000000001.pack";
  { std::ofstream(planted) << "mallory's\n"; }
  ASSERT_EQ(::chown(planted.c_str(), OtherUid(), OtherUid()), 0);
  ASSERT_EQ(::chmod(home.c_str(), 0755), 0);
  auto fd = OpenPrivateDirectory(home, "chunk store");
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().message(), "chunk store " + planted.string() + ": owned by " +
                                      UidText(OtherUid()) +
                                      ", not by this user (uid 0); use a directory of your own");
  ASSERT_EQ(::stat((home / "store").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "a subdirectory open to others is tightened too";
  // A file of mallory's at the registry's name in a directory that was always private.
  ASSERT_EQ(::rename(planted.c_str(), (home / "registry.db").c_str()), 0);
  EXPECT_EQ(MakeDatabasePrivate(home / "registry.db", "registry").message(),
            "registry " + (home / "registry.db").string() + ": owned by " + UidText(OtherUid()) +
                ", not by this user (uid 0); use a directory of your own");
  ASSERT_EQ(::unlink((home / "registry.db").c_str()), 0);
  // Its -wal, which SQLite would open through a symlink.
  ASSERT_EQ(::symlink(victim.c_str(), (home / "registry.db-wal").c_str()), 0);
  ASSERT_EQ(::lchown((home / "registry.db-wal").c_str(), OtherUid(), OtherUid()), 0);
  EXPECT_EQ(MakeDatabasePrivate(home / "registry.db", "registry").code(),
            StatusCode::kPermissionDenied);
  ASSERT_EQ(::unlink((home / "registry.db-wal").c_str()), 0);
  // With only this user's entries it opens, whatever its mode was.
  ASSERT_EQ(::chmod(home.c_str(), 0777), 0);
  EXPECT_TRUE(OpenPrivateDirectory(home, "chunk store").has_value());
  EXPECT_TRUE(MakeDatabasePrivate(home / "registry.db", "registry").ok());
  // A symlink of root's own is followed, as fs.protected_symlinks would.
  ASSERT_EQ(::symlink(victim.c_str(), (home / "keys.db").c_str()), 0);
  EXPECT_TRUE(CreatePrivateFile(home / "keys.db", "key store").ok());
}

// From an attacking helper: BDN_HOME=/tmp/x, a symlink of mallory's to /etc, put root's store in
// /etc and made /etc 0700.
TEST_F(PrivateFilesTest, AnotherUsersSymlinkOnThePathIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make another user's symlink";
  const fs::path target = root_ / "etc";
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(target.c_str(), 0755), 0);
  const fs::path link = root_ / "x";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_EQ(::lchown(link.c_str(), OtherUid(), OtherUid()), 0);
  const std::string refused = link.string() + " is a symlink owned by " + UidText(OtherUid()) +
                              ", not by this user (uid 0) or root; use a path of your own";
  for (const fs::path& home : {link, fs::path(link.string() + "/"), link / "home", link / "."}) {
    Status s = CreatePrivateDirectory(home, "BDN_HOME");
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << home;
    EXPECT_EQ(s.message(), "BDN_HOME " + home.string() + ": " + refused);
  }
  struct stat st;
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u) << "never chmodded through the link";
  EXPECT_FALSE(fs::exists(target / "home"));
  // Through a symlink of root's that leads to the other user's.
  const fs::path mine = root_ / "mine";
  ASSERT_EQ(::symlink(link.c_str(), mine.c_str()), 0);
  Status s = CreatePrivateDirectory(mine / "home", "BDN_HOME");
  EXPECT_EQ(s.message(), "BDN_HOME " + (mine / "home").string() + ": " + refused);
  // A symlink of this user's own is followed, and the directory it names tightened.
  ASSERT_EQ(::lchown(link.c_str(), 0, 0), 0);
  EXPECT_TRUE(CreatePrivateDirectory(mine, "BDN_HOME").ok());
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// From an attacking helper: a --cache-dir below a directory mallory owns (or one anyone may
// write to) was accepted; mallory could rename the private directory away between runs and put
// her own in its place.
TEST_F(PrivateFilesTest, ADirectoryAboveThatAnotherUserMayChangeIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  const fs::path theirs = root_ / "mallory";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), OtherUid(), OtherUid()), 0);
  Status s = CreatePrivateDirectory(theirs / "cache" / "deeper", "node cache");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "node cache " + (theirs / "cache" / "deeper").string() + ": " +
                             theirs.string() + ", a directory above it, is owned by " +
                             UidText(OtherUid()) +
                             ", not by this user (uid 0) or root, who could replace what is in "
                             "it; use a directory of your own");
  EXPECT_FALSE(fs::exists(theirs / "cache"));
  // Through a symlink of root's, the directory it leads to is the one that counts.
  ASSERT_EQ(::symlink(theirs.c_str(), (root_ / "link").c_str()), 0);
  EXPECT_FALSE(OpenPrivateDirectory(root_ / "link" / "cache", "node cache").has_value());

  const fs::path shared = root_ / "shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  s = CreatePrivateDirectory(shared / "cache", "node cache");
  EXPECT_EQ(s.message(), "node cache " + (shared / "cache").string() + ": " + shared.string() +
                             ", a directory above it, is writable by other users (mode 0777, no "
                             "sticky bit), who could replace what is in it; use a directory of "
                             "your own");
  ASSERT_EQ(::chmod(shared.c_str(), 0775), 0);
  ASSERT_EQ(::chown(shared.c_str(), 0, OtherUid()), 0);
  EXPECT_EQ(CreatePrivateDirectory(shared / "cache", "node cache").code(),
            StatusCode::kPermissionDenied)
      << "writable by another group";
  // With the sticky bit (as /tmp) nobody else may rename what is this user's.
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  EXPECT_TRUE(CreatePrivateDirectory(shared / "cache", "node cache").ok());
  // The directory itself may have been open to others: it is tightened, not refused.
  ASSERT_EQ(::chmod((shared / "cache").c_str(), 0777), 0);
  EXPECT_TRUE(OpenPrivateDirectory(shared / "cache", "node cache").has_value());
}

// From an attacking helper: a directory of mode 0775 whose group was this user's effective group
// counted as private when the group listed no other member, though it was the primary group of
// other accounts (group `users`, gid 100), who are its members without being listed.
TEST_F(PrivateFilesTest, AGroupThatIsAnotherUsersPrimaryGroupIsNotThisUsersOwn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to take another group as its own";
  gid_t gid = 0;
  for (struct passwd* pw = ::getpwent(); pw; pw = ::getpwent()) {
    struct group* gr = pw->pw_uid != 0 && pw->pw_gid != 0 ? ::getgrgid(pw->pw_gid) : nullptr;
    if (gr && (!gr->gr_mem || !gr->gr_mem[0])) {
      gid = pw->pw_gid;
      break;
    }
  }
  ::endpwent();
  if (gid == 0) GTEST_SKIP() << "no user whose primary group lists no member";
  const fs::path shared = root_ / "shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0775), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0775), 0);
  ASSERT_EQ(::chown(shared.c_str(), 0, gid), 0);
  ASSERT_EQ(::setegid(gid), 0);
  Status s = CreatePrivateDirectory(shared / "cache", "node cache");
  ASSERT_EQ(::setegid(0), 0);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "node cache " + (shared / "cache").string() + ": " + shared.string() +
                             ", a directory above it, is writable by other users (mode 0775, no "
                             "sticky bit), who could replace what is in it; use a directory of "
                             "your own");
  EXPECT_FALSE(fs::exists(shared / "cache"));
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
