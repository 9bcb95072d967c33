// SourceAccess, what a server's sync jobs may read: file:// under the file roots only (symlinks
// resolved first), never at, in or above the data directory; http(s) sources and endpoints whose
// host is a non-public IP literal refused before a job exists; embedded access unrestricted.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "bdn/sync/file_source.h"
#include "bdn/sync/source.h"
#include "bdn/sync/source_uri.h"
#include "bdn/testing/status_matchers.h"
#include "bdn/testing/test_util.h"

namespace bdn::sync {
namespace {

namespace fs = std::filesystem;

struct Tree {
  testutil::TempDir tmp{"bdn_access"};
  fs::path base = fs::canonical(tmp.path());
  fs::path root = base / "ckpt";
  fs::path data = base / "data";
  fs::path outside = base / "outside";
  Tree() {
    fs::create_directories(root / "run-7");
    fs::create_directories(data / "store");
    fs::create_directories(outside);
    std::ofstream(root / "run-7" / "model.bin") << "weights";
    std::ofstream(data / "secrets.key") << "key";
    std::ofstream(outside / "passwd") << "x";
    fs::create_directory_symlink(outside, root / "escape");
    fs::create_directory_symlink(data, root / "to-data");
  }
  SourceAccess Server() const {
    SourceAccess a;
    a.file_roots = std::vector<std::string>{root.string()};
    a.forbidden_dirs = {data.string()};
    a.public_addresses_only = true;
    return a;
  }
  std::string Uri(const fs::path& p) const { return "file://" + p.string(); }
};

TEST(CheckFileAccess, EmbeddedReadsAnyPathAsGiven) {
  Tree t;
  auto p = CheckFileAccess(t.Uri(t.root / "escape"), (t.root / "escape").string(), SourceAccess{});
  ASSERT_OK(p);
  EXPECT_EQ((t.root / "escape").string(), *p);  // not resolved: today's behaviour
  EXPECT_OK(CheckSourceAccess(t.Uri(t.data), "", SourceAccess{}));
  EXPECT_OK(CheckSourceAccess("http://127.0.0.1:9/x", "", SourceAccess{}));
}

TEST(CheckFileAccess, UnderARootIsReadAtItsCanonicalPath) {
  Tree t;
  SourceAccess a = t.Server();
  auto p = CheckFileAccess(t.Uri(t.root / "run-7"), (t.root / "run-7").string(), a);
  ASSERT_OK(p);
  EXPECT_EQ((t.root / "run-7").string(), *p);
  const fs::path dotted = t.root / "run-7" / ".." / "run-7" / "model.bin";
  p = CheckFileAccess(t.Uri(dotted), dotted.string(), a);
  ASSERT_OK(p);
  EXPECT_EQ((t.root / "run-7" / "model.bin").string(), *p);
  EXPECT_OK(CheckFileAccess(t.Uri(t.root), t.root.string(), a));  // the root itself
  // A path that does not exist yet under a root passes (the job then fails source_not_found).
  EXPECT_OK(CheckFileAccess(t.Uri(t.root / "later"), (t.root / "later").string(), a));
}

TEST(CheckFileAccess, RefusesWhatLiesOutsideTheRootsAfterResolvingSymlinks) {
  Tree t;
  SourceAccess a = t.Server();
  for (const fs::path& p : {t.outside / "passwd", t.root / "escape", t.root / "escape" / "passwd",
                            t.root / ".." / "outside", fs::path("/etc"), t.base / "ckpt-other"}) {
    auto r = CheckFileAccess(t.Uri(p), p.string(), a);
    EXPECT_STATUS(r, kPermissionDenied,
                  "source \"" + t.Uri(p) + "\": " + p.string() +
                      " is outside the directories bdn serve --sync-file-root allows (symlinks "
                      "are resolved first)");
    EXPECT_EQ("file_not_allowed", r.error().reason()) << p;
  }
}

TEST(CheckFileAccess, NeverTheDataDirectoryNorAnythingAboveIt) {
  Tree t;
  SourceAccess a = t.Server();
  a.file_roots->push_back(t.base.string());  // a root that holds the data directory
  for (const fs::path& p : {t.data, t.data / "secrets.key", t.data / "store", t.root / "to-data",
                            t.root / "to-data" / "secrets.key"}) {
    auto r = CheckFileAccess(t.Uri(p), p.string(), a);
    EXPECT_STATUS(
        r, kPermissionDenied,
        "source \"" + t.Uri(p) + "\": the server's data directory is never a sync source");
    EXPECT_EQ("file_not_allowed", r.error().reason()) << p;
  }
  auto above = CheckFileAccess(t.Uri(t.base), t.base.string(), a);
  EXPECT_STATUS(above, kPermissionDenied,
                "source \"" + t.Uri(t.base) +
                    "\": holds the server's data directory, which is never a sync source");
  auto slash = CheckFileAccess("file:///", "/", a);
  EXPECT_STATUS(slash, kPermissionDenied,
                "source \"file:///\": holds the server's data directory, which is never a sync "
                "source");
  EXPECT_OK(CheckFileAccess(t.Uri(t.outside), t.outside.string(), a));  // beside it: fine
}

TEST(CheckFileAccess, NoRootsRefusesEveryFileSource) {
  Tree t;
  SourceAccess a = t.Server();
  a.file_roots->clear();
  auto r = CheckSourceAccess(t.Uri(t.root), "", a);
  EXPECT_STATUS(r, kPermissionDenied,
                "source \"" + t.Uri(t.root) +
                    "\": file:// sources are not allowed on this server (bdn serve "
                    "--sync-file-root DIR allows the files under DIR)");
  EXPECT_EQ("file_not_allowed", r.reason());
}

TEST(CheckSourceAccess, RefusesNonPublicIpLiteralsInSourcesAndEndpoints) {
  Tree t;
  SourceAccess a = t.Server();
  struct Case {
    std::string uri, endpoint, message;
  } cases[] = {
      {"http://169.254.169.254/latest/meta-data/iam", "",
       "source \"http://169.254.169.254/latest/meta-data/iam\": 169.254.169.254 is a link-local "
       "address; this server syncs only from public addresses (bdn serve "
       "--sync-allow-private-addresses allows others)"},
      {"https://127.0.0.1:8443/f.bin", "",
       "source \"https://127.0.0.1:8443/f.bin\": 127.0.0.1 is a loopback address"},
      {"http://[::1]:80/f.bin", "",
       "source \"http://[::1]:80/f.bin\": [::1] is a loopback address"},
      {"http://10.0.0.7/f.bin", "",
       "source \"http://10.0.0.7/f.bin\": 10.0.0.7 is a private address"},
      {"s3://bucket/p", "http://127.0.0.1:9000",
       "source \"s3://bucket/p\": --endpoint \"http://127.0.0.1:9000\": 127.0.0.1 is a loopback "
       "address"},
      {"azure://acct/c", "http://192.168.1.5:10000/acct",
       "source \"azure://acct/c\": --endpoint \"http://192.168.1.5:10000/acct\": 192.168.1.5 is a "
       "private address"},
  };
  for (const Case& c : cases) {
    Status s = CheckSourceAccess(c.uri, c.endpoint, a);
    EXPECT_STATUS(s, kPermissionDenied, c.message);
    EXPECT_EQ("address_not_allowed", s.reason()) << c.uri;
    SourceAccess open = a;
    open.public_addresses_only = false;
    EXPECT_OK(CheckSourceAccess(c.uri, c.endpoint, open));
  }
  // Names and public addresses: judged when connecting.
  EXPECT_OK(CheckSourceAccess("https://huggingface.co/x/resolve/main/f", "", a));
  EXPECT_OK(CheckSourceAccess("http://localhost:9/f.bin", "", a));
  EXPECT_OK(CheckSourceAccess("https://8.8.8.8/f.bin", "", a));
  EXPECT_OK(CheckSourceAccess("hf://org/repo", "", a));
  EXPECT_OK(CheckSourceAccess("s3://bucket/p", "https://{bucket}.cwlota.com", a));
}

// A push key sent an admin's secret as a Bearer token to the host it named (https://), and an
// OAuth token or SAS to an --endpoint or Azure account of its choosing.
TEST(SecretHostChosenByCaller, NamesWhereTheCallerPicksTheHost) {
  struct Case {
    std::string uri, endpoint;
    std::optional<std::string> why;
  };
  const std::vector<Case> cases = {
      {"https://evil.example/x.bin", "", "an http(s):// source names its host"},
      {"http://127.0.0.1:9/t/resolve/x/stolen.txt", "", "an http(s):// source names its host"},
      {"s3://b/p", "http://evil.example", "--endpoint names the host"},
      {"gs://b/p", "http://evil.example", "--endpoint names the host"},
      {"azure://acct/c", "http://evil.example/acct", "--endpoint names the host"},
      {"azure://attacker/c/p", "", "an azure:// source names the storage account, and so the host"},
      {"hf://org/repo", "", std::nullopt},
      {"hf://datasets/org/repo@main", "", std::nullopt},
      {"s3://b/p", "", std::nullopt},
      {"r2://acct.b/p", "", std::nullopt},
      {"cw://b", "", std::nullopt},
      {"gs://b/p", "", std::nullopt},
      {"file:///data/ckpt", "", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.why, SecretHostChosenByCaller(c.uri, c.endpoint)) << c.uri << " " << c.endpoint;
  }
}

TEST(FileSource, ListReadsTheCheckedPathAndRefusesOthers) {
  Tree t;
  SourceOptions o;
  o.access = t.Server();
  auto parsed = ParseSourceUri(t.Uri(t.root / "run-7"));
  ASSERT_OK(parsed);
  auto source = OpenFileSource(t.Uri(t.root / "run-7"), std::get<FileUri>(*parsed), o);
  ASSERT_OK(source);
  auto listing = (*source)->List();
  ASSERT_OK(listing);
  ASSERT_EQ(1u, listing->objects.size());
  EXPECT_EQ("model.bin", listing->objects[0].path);

  parsed = ParseSourceUri(t.Uri(t.root / "escape"));
  ASSERT_OK(parsed);
  source = OpenFileSource(t.Uri(t.root / "escape"), std::get<FileUri>(*parsed), o);
  ASSERT_OK(source);
  auto refused = (*source)->List();
  EXPECT_STATUS(refused, kPermissionDenied, "source \"" + t.Uri(t.root / "escape") + "\": ");
  EXPECT_EQ("file_not_allowed", refused.error().reason());
}

// A listed file replaced by a FIFO (or a socket) before it is read is a change of the source,
// as a symlink swapped in is: the open neither blocks waiting for a writer (no signal ended it)
// nor reads it. Likewise a single-file source.
TEST(FileSource, AListedFileReplacedByAFifoOrSocketIsAChangeNotAHang) {
  Tree t;
  std::ofstream(t.root / "run-7" / "config.json") << "{}";
  auto parsed = ParseSourceUri(t.Uri(t.root / "run-7"));
  ASSERT_OK(parsed);
  auto source = OpenFileSource(t.Uri(t.root / "run-7"), std::get<FileUri>(*parsed), {});
  ASSERT_OK(source);
  auto listing = (*source)->List();
  ASSERT_OK(listing);
  ASSERT_EQ(2u, listing->objects.size());
  fs::remove(t.root / "run-7" / "model.bin");
  ASSERT_EQ(0, ::mkfifo((t.root / "run-7" / "model.bin").c_str(), 0600));
  auto stream = (*source)->Open(listing->objects[1], 0);
  ASSERT_OK(stream);
  std::vector<uint8_t> buf(16);
  auto read = (*stream)->Read(buf);
  EXPECT_STATUS(read, kFailedPrecondition,
                t.Uri(t.root / "run-7") +
                    ": file \"model.bin\": changed during the sync (it was replaced by something "
                    "that is not a regular file)");
  EXPECT_EQ(kSourceChanged, read.error().reason());

  const fs::path single = t.root / "one.bin";
  std::ofstream(single) << "one";
  parsed = ParseSourceUri(t.Uri(single));
  ASSERT_OK(parsed);
  source = OpenFileSource(t.Uri(single), std::get<FileUri>(*parsed), {});
  ASSERT_OK(source);
  listing = (*source)->List();
  ASSERT_OK(listing);
  fs::remove(single);
  ASSERT_EQ(0, ::mkfifo(single.c_str(), 0600));
  stream = (*source)->Open(listing->objects[0], 0);
  ASSERT_OK(stream);
  read = (*stream)->Read(buf);
  EXPECT_STATUS(read, kFailedPrecondition,
                t.Uri(single) +
                    ": file \"one.bin\": changed during the sync (it was replaced by "
                    "something that is not a regular file)");
}

}  // namespace
}  // namespace bdn::sync
