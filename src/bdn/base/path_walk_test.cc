// OpenDirectoryPath on a real temporary directory: this user's and root's symlinks followed,
// another user's refused wherever it is on the path (last component, with a trailing slash, a
// component before the last, swapped in while the walk runs), ".." after a symlink as the kernel
// resolves it, missing directories created, symlink loops ended.
#include "bdn/base/path_walk.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace bdn {
namespace {
namespace fs = std::filesystem;

class PathWalkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "bdn-walk-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = fs::canonical(tmpl);
  }
  void TearDown() override { fs::remove_all(root_); }
  // Another user: mallory (uid 1001) where she exists, else nobody.
  static uid_t OtherUid() { return ::getpwuid(1001) ? 1001 : 65534; }
  // A directory like /tmp: anyone may add entries, only their owner remove them.
  fs::path Shared() {
    const fs::path shared = root_ / "shared";
    fs::create_directories(shared);
    EXPECT_EQ(::chmod(shared.c_str(), 01777), 0);
    return shared;
  }
  // A symlink at `link` to `target`, owned by `uid`.
  static void Symlink(const fs::path& target, const fs::path& link, uid_t uid) {
    fs::create_symlink(target, link);
    ASSERT_EQ(::lchown(link.c_str(), uid, uid), 0);
  }
  // The (device, inode) of the directory open as `fd`, or of `path`.
  static std::pair<dev_t, ino_t> Id(int fd) {
    struct stat st {};
    EXPECT_EQ(::fstat(fd, &st), 0);
    return {st.st_dev, st.st_ino};
  }
  static std::pair<dev_t, ino_t> Id(const fs::path& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return {st.st_dev, st.st_ino};
  }
  static std::string Shown(const fs::path& p) { return "directory \"" + p.string() + "\""; }
  static std::string Refused(const fs::path& path, const std::string& link, const fs::path& to) {
    return Shown(path) + ": " + link + " owned by " + UidText(OtherUid()) +
           ", not by this user or root; give the directory it names (\"" + to.string() +
           "\") if that is the one you mean";
  }
  fs::path root_;
};

TEST_F(PathWalkTest, OpensADirectory) {
  fs::create_directories(root_ / "a/b");
  auto d = OpenDirectoryPath(root_ / "a/b", Shown(root_ / "a/b"));
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(Id(d->fd.get()), Id(root_ / "a/b"));
  EXPECT_FALSE(d->created);
  // Read access: the descriptor lists the directory.
  EXPECT_EQ(::faccessat(d->fd.get(), ".", R_OK, 0), 0);
}

TEST_F(PathWalkTest, ARelativePathIsWalkedFromTheCurrentDirectory) {
  fs::create_directories(root_ / "a/b");
  const fs::path was = fs::current_path();
  fs::current_path(root_);
  auto d = OpenDirectoryPath("a/./b/", Shown("a/./b/"));
  fs::current_path(was);
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(Id(d->fd.get()), Id(root_ / "a/b"));
}

TEST_F(PathWalkTest, FollowsThisUsersAndRootsSymlinks) {
  fs::create_directories(root_ / "real/inner");
  fs::create_symlink(root_ / "real", root_ / "abs");
  fs::create_symlink("real", root_ / "rel");
  fs::create_symlink("abs/inner", root_ / "chain");  // a link through a link
  for (const auto& [path, is] :
       std::vector<std::pair<std::string, std::string>>{{"abs", "real"},
                                                        {"abs/", "real"},
                                                        {"rel", "real"},
                                                        {"rel/inner", "real/inner"},
                                                        {"chain", "real/inner"}}) {
    auto d = OpenDirectoryPath(root_ / path, Shown(root_ / path));
    ASSERT_TRUE(d.has_value()) << path << ": " << d.error().message();
    EXPECT_EQ(Id(d->fd.get()), Id(root_ / is)) << path;
  }
  if (::geteuid() != 0) return;
  // Root's own link in a shared directory, followed by root as anyone else's is not.
  const fs::path shared = Shared();
  Symlink(root_ / "real", shared / "roots", 0);
  auto d = OpenDirectoryPath(shared / "roots", Shown(shared / "roots"));
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(Id(d->fd.get()), Id(root_ / "real"));
}

// From an attacking helper: root's `bdn volume pull REF /tmp/shared/models/` wrote into root's
// 0700 /root/victim through mallory's symlink /tmp/shared/models (the check looked at the last
// component without the slash; open(2) followed it). Refused as the last component, with a
// trailing slash, and as a component before the last, and nothing is made in the victim.
TEST_F(PathWalkTest, RefusesAnotherUsersSymlinkAnywhereOnThePath) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a symlink to another user";
  const fs::path victim = root_ / "victim";
  fs::create_directories(victim);
  ASSERT_EQ(::chmod(victim.c_str(), 0700), 0);
  const fs::path shared = Shared();
  const fs::path models = shared / "models";
  Symlink(victim, models, OtherUid());
  PathWalk create;
  create.missing = PathWalk::Missing::kCreate;
  struct Case {
    fs::path path;
    std::string link;
  };
  for (const Case& c :
       {Case{models, "a symlink"}, Case{shared / "models/", models.string() + " is a symlink"},
        Case{models / "x", models.string() + " is a symlink"},
        Case{models / "x/y", models.string() + " is a symlink"}}) {
    for (const PathWalk& walk : {PathWalk{}, create}) {
      auto d = OpenDirectoryPath(c.path, Shown(c.path), walk);
      ASSERT_FALSE(d.has_value()) << c.path;
      EXPECT_EQ(d.error().code(), StatusCode::kFailedPrecondition);
      EXPECT_EQ(d.error().message(), Refused(c.path, c.link, victim));
    }
  }
  // Reached through a link of root's own, it is refused all the same.
  Symlink(shared, root_ / "via", 0);
  auto d = OpenDirectoryPath(root_ / "via/models/x", Shown(root_ / "via/models/x"), create);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message(),
            Refused(root_ / "via/models/x", models.string() + " is a symlink", victim));
  // A relative target is named from the link's directory.
  Symlink("../victim", shared / "rel", OtherUid());
  d = OpenDirectoryPath(shared / "rel", Shown(shared / "rel"));
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message(), Refused(shared / "rel", "a symlink", shared / "../victim"));
  EXPECT_TRUE(fs::is_empty(victim));
  // The caller's own words for the refusal.
  PathWalk own;
  own.refuse_symlink = [](const ForeignSymlink& l) {
    return PermissionDeniedError(l.link + "|" + std::to_string(l.is_the_path) + "|" +
                                 std::to_string(l.uid) + "|" + l.target);
  };
  d = OpenDirectoryPath(models, Shown(models), own);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(d.error().message(),
            models.string() + "|1|" + std::to_string(OtherUid()) + "|" + victim.string());
  // Followed as the kernel does when asked to.
  PathWalk any;
  any.symlinks = PathWalk::Symlinks::kAny;
  d = OpenDirectoryPath(shared / "models/", Shown(shared / "models/"), any);
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(Id(d->fd.get()), Id(victim));
}

// The race of the attack above without a slash: mallory makes and removes her link at the
// destination in a loop while root's walk runs (it hit within 25-50 tries when the check and
// the open were separate lookups). The walk cannot lose that race by construction: each
// component is looked up once, with openat(O_PATH | O_NOFOLLOW), and the owner is judged and the
// target read (readlinkat(fd, "")) on that one descriptor, so the link that was checked is the
// link followed; a directory the walk made (mkdirat) is looked up again and judged like anything
// else found there. So every walk either refuses her link or opens root's own new directory.
TEST_F(PathWalkTest, ALinkSwappedInWhileWalkingIsNeverFollowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  const fs::path victim = root_ / "victim";
  fs::create_directories(victim);
  ASSERT_EQ(::chmod(victim.c_str(), 0700), 0);
  const fs::path shared = Shared();
  ASSERT_EQ(::chmod(root_.c_str(), 0755), 0);
  const fs::path r = shared / "r";
  const pid_t mallory = ::fork();
  ASSERT_GE(mallory, 0);
  if (mallory == 0) {
    if (::setgid(OtherUid()) != 0 || ::setuid(OtherUid()) != 0) ::_exit(1);
    while (true) {
      ::symlink(victim.c_str(), r.c_str());
      ::unlink(r.c_str());
    }
  }
  PathWalk create;
  create.missing = PathWalk::Missing::kCreate;
  int refused = 0, opened = 0;
  for (int i = 0; i < 400; ++i) {
    auto d = OpenDirectoryPath(r, Shown(r), create);
    if (!d) {
      EXPECT_EQ(d.error().message(), Refused(r, "a symlink", victim));
      ++refused;
      continue;
    }
    EXPECT_NE(Id(d->fd.get()), Id(victim)) << "try " << i;
    ++opened;
    ::rmdir(r.c_str());  // root's own new directory, which mallory cannot remove
  }
  ::kill(mallory, SIGKILL);
  ::waitpid(mallory, nullptr, 0);
  EXPECT_TRUE(fs::is_empty(victim));
  EXPECT_EQ(refused + opened, 400);
}

// As the kernel resolves it: ".." after a symlink goes up from the link's target (a/b/c/..  is
// a/b), not back to the directory that holds the link.
TEST_F(PathWalkTest, DotDotAfterASymlinkGoesToTheTargetsParent) {
  fs::create_directories(root_ / "a/b/c");
  fs::create_symlink("a/b/c", root_ / "link");
  auto d = OpenDirectoryPath(root_ / "link/..", Shown(root_ / "link/.."));
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(Id(d->fd.get()), Id(root_ / "a/b"));
  PathWalk create;
  create.missing = PathWalk::Missing::kCreate;
  d = OpenDirectoryPath(root_ / "link/../x", Shown(root_ / "link/../x"), create);
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_TRUE(d->created);
  // As the kernel resolved it: through the link's target.
  EXPECT_EQ(d->made, std::vector<std::string>{(fs::canonical(root_) / "a/b/x").string()});
  EXPECT_TRUE(fs::is_directory(root_ / "a/b/x"));
  EXPECT_FALSE(fs::exists(root_ / "x"));
  // ".." in a link's own target, and at "/", as well.
  fs::create_symlink("c/../../b/c/..", root_ / "a/b/up");
  d = OpenDirectoryPath(root_ / "a/b/up", Shown(root_ / "a/b/up"));
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(Id(d->fd.get()), Id(root_ / "a/b"));
  d = OpenDirectoryPath("/../..", Shown("/../.."));
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(Id(d->fd.get()), Id("/"));
}

TEST_F(PathWalkTest, CreatesMissingDirectoriesButNeverASymlinksTarget) {
  PathWalk create;
  create.missing = PathWalk::Missing::kCreate;
  create.new_mode_is = PathWalk::NewMode::kExact;
  create.new_mode = 0700;
  const mode_t was = ::umask(0077 ^ 0777);  // a umask that would give 0077
  auto d = OpenDirectoryPath(root_ / "n1/n2/n3", Shown(root_ / "n1/n2/n3"), create);
  ::umask(was);
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_TRUE(d->created);
  const fs::path real = fs::canonical(root_);
  EXPECT_EQ(d->made, (std::vector<std::string>{(real / "n1").string(), (real / "n1/n2").string(),
                                               (real / "n1/n2/n3").string()}));
  EXPECT_EQ(Id(d->fd.get()), Id(root_ / "n1/n2/n3"));
  for (const char* p : {"n1", "n1/n2", "n1/n2/n3"}) {
    EXPECT_EQ(fs::status(root_ / p).permissions(), fs::perms(0700)) << p;
  }
  // Without kCreate: NotFound.
  auto missing = OpenDirectoryPath(root_ / "none/x", Shown(root_ / "none/x"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(root_ / "none"));
  // A dangling link's target is not made, nor what a link to a file would need.
  fs::create_symlink(root_ / "nowhere", root_ / "dangling");
  std::ofstream(root_ / "file") << "x";
  fs::create_symlink(root_ / "file", root_ / "to-file");
  struct Case {
    std::string path;
    std::string why;
  };
  for (const Case& c : {
           Case{"dangling",
                "a symlink to \"" + (root_ / "nowhere").string() + "\", which does not exist"},
           Case{"dangling/x", (root_ / "dangling").string() + " is a symlink to \"" +
                                  (root_ / "nowhere").string() + "\", which does not exist"},
           Case{"file", "exists and is not a directory"},
           Case{"file/x", (root_ / "file").string() + " exists and is not a directory"},
           Case{"to-file/", (root_ / "to-file").string() + " is a symlink to \"" +
                                (root_ / "file").string() + "\", which is not a directory"},
       }) {
    auto r = OpenDirectoryPath(root_ / c.path, Shown(root_ / c.path), create);
    ASSERT_FALSE(r.has_value()) << c.path;
    EXPECT_EQ(r.error().code(), StatusCode::kFailedPrecondition) << c.path;
    EXPECT_EQ(r.error().message(), Shown(root_ / c.path) + ": " + c.why);
  }
  EXPECT_FALSE(fs::exists(root_ / "nowhere"));
}

TEST_F(PathWalkTest, EndsASymlinkLoop) {
  fs::create_symlink("loop", root_ / "loop");
  auto d = OpenDirectoryPath(root_ / "loop", Shown(root_ / "loop"));
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message(), Shown(root_ / "loop") + ": " + std::string(std::strerror(ELOOP)));
}

TEST_F(PathWalkTest, ChecksEveryDirectoryItLooksANameUpIn) {
  fs::create_directories(root_ / "a/b/c");
  fs::create_symlink("a/b", root_ / "link");
  std::vector<std::string> seen;
  PathWalk walk;
  walk.check_directory = [&](const struct stat& st, const std::string& dir) {
    EXPECT_EQ(std::pair(st.st_dev, st.st_ino), Id(dir));
    seen.push_back(dir);
    return dir == (root_ / "a/b").string() ? PermissionDeniedError("no: " + dir) : Status::Ok();
  };
  auto d = OpenDirectoryPath(root_ / "link/c", Shown(root_ / "link/c"), walk);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message(), "no: " + (root_ / "a/b").string());
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen[seen.size() - 3], root_.string());
  EXPECT_EQ(seen[seen.size() - 2], (root_ / "a").string());
}

}  // namespace
}  // namespace bdn
