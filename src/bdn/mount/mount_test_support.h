// Helpers for tests that mount hand-built versions for real: a version builder, a private
// temporary directory, ServeMount run on a thread of the test process, a store whose faults the
// test controls, and a fixture that mounts over such a store. Test-only.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bdn/base/mutex.h"
#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"
#include "bdn/mount/fuse_mount.h"
#include "bdn/store/chunk_store.h"
#include "bdn/testing/test_util.h"
#include "bdn/volume/version_view.h"

namespace bdn::mount_testing {
namespace fs = std::filesystem;

inline constexpr long kFuseSuperMagic = 0x65735546;

inline std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Builds a version by hand: files are cut into fixed pieces of the given lengths (cycled), which
// is as valid a chunking as any; chunk indexes are written as a push writes them
// (EncodeFileIndex).
class VersionBuilder {
 public:
  explicit VersionBuilder(ChunkStore& store) : store_(store) {}

  void Dir(const std::string& path, uint16_t mode = 0755) {
    Entry e;
    e.path = path;
    e.kind = EntryKind::kDirectory;
    e.mode = mode;
    Add(std::move(e));
  }

  void File(const std::string& path, const std::string& content, uint16_t mode = 0644,
            std::vector<size_t> pieces = {65536}) {
    Entry e;
    e.path = path;
    e.kind = EntryKind::kFile;
    e.mode = mode;
    e.size_bytes = content.size();
    e.digest = Digest::Of(content);
    std::vector<ChunkRef> chunks;
    for (size_t off = 0, k = 0; off < content.size(); ++k) {
      size_t n = std::min(pieces[k % pieces.size()], content.size() - off);
      std::string_view piece(content.data() + off, n);
      Digest id = Digest::Of(piece);
      EXPECT_TRUE(store_.Put(id, Bytes(piece)).ok());
      chunks.push_back({id, static_cast<uint32_t>(n)});
      off += n;
    }
    if (chunks.empty()) {
      e.layout = FileLayout::kEmpty;
    } else if (chunks.size() == 1) {
      e.layout = FileLayout::kSingleChunk;
    } else {
      e.layout = FileLayout::kIndexed;
      // As a push writes it: one version-1 object, or pieces for more than 1,024 chunks.
      FileIndexBlobs index = EncodeFileIndex(chunks);
      for (const auto& [id, blob] : index.pieces) EXPECT_TRUE(store_.Put(id, Bytes(blob)).ok());
      e.index = Digest::Of(index.root);
      EXPECT_TRUE(store_.Put(e.index, Bytes(index.root)).ok());
    }
    contents[path] = content;
    chunk_lists[path] = chunks;
    Add(std::move(e));
  }

  void Symlink(const std::string& path, const std::string& target) {
    Entry e;
    e.path = path;
    e.kind = EntryKind::kSymlink;
    e.mode = 0777;
    e.target = target;
    Add(std::move(e));
  }

  void Hardlink(const std::string& path, const std::string& target) {
    Entry e;
    e.path = path;
    e.kind = EntryKind::kHardlink;
    e.target = target;
    contents[path] = contents.at(target);
    Add(std::move(e));
  }

  // Sorts the entries, stores the manifest and returns its digest.
  Digest Finish(std::optional<int64_t> mtime_ns = std::nullopt) {
    Manifest m;
    // The pieces are cut by hand, not by FastCDC: allow chunks up to the format's largest maximum.
    m.chunker.max_bytes = 16u << 20;
    m.has_mtimes = mtime_ns.has_value();
    m.entries = entries_;
    for (Entry& e : m.entries) e.mtime_ns = mtime_ns;
    std::sort(m.entries.begin(), m.entries.end(),
              [](const Entry& a, const Entry& b) { return a.path < b.path; });
    auto encoded = EncodeManifest(m);
    EXPECT_TRUE(encoded.has_value()) << encoded.error().ToString();
    Digest d = Digest::Of(*encoded);
    EXPECT_TRUE(store_.Put(d, Bytes(*encoded)).ok());
    return d;
  }

  std::map<std::string, std::string> contents;  // file and hardlink paths -> bytes
  std::map<std::string, std::vector<ChunkRef>> chunk_lists;

 private:
  void Add(Entry e) { entries_.push_back(std::move(e)); }
  ChunkStore& store_;
  std::vector<Entry> entries_;
};

inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(s.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return s;
}

// A private directory under /tmp, removed (if nothing is mounted in it) at the end.
struct TempDir : testutil::TempDir {
  TempDir() : testutil::TempDir("bdn_mount_test") {}
};

inline bool IsFuseMounted(const fs::path& p) {
  struct statfs s;
  return ::statfs(p.c_str(), &s) == 0 && s.f_type == kFuseSuperMagic;
}

// ServeMount on a thread of this process, with the ready_fd handshake.
class InProcessMount {
 public:
  // A test that cares how the mount stopped calls Stop() itself and checks it.
  ~InProcessMount() { Stop().IgnoreError(); }

  Status Start(std::shared_ptr<VersionView> view, MountOptions options) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return InternalError("pipe");
    options.ready_fd = fds[1];
    mountpoint_ = options.mountpoint;
    thread_ = std::thread([this, view, options] { status_ = ServeMount(view, options); });
    pollfd pfd{.fd = fds[0], .events = POLLIN, .revents = 0};
    char c = 0;
    bool ready = ::poll(&pfd, 1, 10000) == 1 && ::read(fds[0], &c, 1) == 1 && c == '1';
    ::close(fds[0]);
    if (ready) {
      mounted_ = true;
      return Status::Ok();
    }
    if (!mounted_ && IsFuseMounted(mountpoint_)) ::umount2(mountpoint_.c_str(), MNT_DETACH);
    thread_.join();
    return status_.ok() ? InternalError("mount never became ready") : status_;
  }

  // Unmounts (if still mounted) and returns ServeMount's status.
  Status Stop() {
    if (!thread_.joinable()) return status_;
    if (mounted_ && IsFuseMounted(mountpoint_)) {
      Status s = Unmount(mountpoint_);
      if (!s.ok()) ::umount2(mountpoint_.c_str(), MNT_DETACH);
    }
    thread_.join();
    mounted_ = false;
    return status_;
  }

  // After an external Unmount: waits for ServeMount to return.
  Status Join() {
    if (thread_.joinable()) thread_.join();
    mounted_ = false;
    return status_;
  }

 private:
  fs::path mountpoint_;
  std::thread thread_;
  Status status_;
  bool mounted_ = false;
};

inline bool FuseAvailable() { return ::access("/dev/fuse", R_OK | W_OK) == 0; }

inline std::string ReadWholeFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One pread with O_DIRECT (past the page cache, so the daemon answers). Returns the bytes; `err`
// gets errno (0 on success).
inline std::string DirectRead(const fs::path& file, uint64_t offset, size_t length, int* err) {
  int fd = ::open(file.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) {
    *err = errno;
    return "";
  }
  void* buf = std::aligned_alloc(4096, (length + 4095) / 4096 * 4096);
  ssize_t n = ::pread(fd, buf, length, static_cast<off_t>(offset));
  *err = n < 0 ? errno : 0;
  std::string out(static_cast<char*>(buf), n > 0 ? static_cast<size_t>(n) : 0);
  std::free(buf);
  ::close(fd);
  return out;
}

inline std::set<std::string> ListDir(const fs::path& p) {
  std::set<std::string> names;
  DIR* d = ::opendir(p.c_str());
  if (d == nullptr) return names;
  while (dirent* de = ::readdir(d)) names.insert(de->d_name);
  ::closedir(d);
  return names;
}

// A store in front of a MemChunkStore (`inner`, which Put fills) whose Get the test controls: it
// counts calls and can be slowed, made to fail with Unavailable or NotFound, to return bytes
// that do not match the id (without verifying them), or to hang until the mode changes.
// Thread-safe.
class FaultyStore : public ChunkStore {
 public:
  enum class Mode { kNormal, kUnavailable, kNotFound, kWrongBytes, kHang };

  Result<bool> Contains(const Digest& id) override { return inner.Contains(id); }
  Result<BlobSizes> Sizes(std::span<const Digest> ids) override { return inner.Sizes(ids); }
  Status Put(const Digest& id, std::span<const uint8_t> data) override {
    return inner.Put(id, data);
  }
  Result<std::vector<uint8_t>> Get(const Digest& id) override {
    ++gets;
    struct CountDone {
      std::atomic<int>& n;
      ~CountDone() { ++n; }
    } count_done{gets_done};
    if (delay.load().count() > 0) std::this_thread::sleep_for(delay.load());
    Mode mode;
    {
      MutexLock lock(mu_);
      if (mode_ == Mode::kHang) {
        ++hanging;
        cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return mode_ != Mode::kHang; });
        --hanging;
      }
      mode = mode_;
      if (fail_next_ > 0) {
        --fail_next_;
        mode = Mode::kUnavailable;
      }
    }
    switch (mode) {
      case Mode::kUnavailable:
        return Err(UnavailableError("chunk " + id.ToString() + ": origin unreachable (test)"));
      case Mode::kNotFound:
        return Err(NotFoundError("chunk " + id.ToString() + ": not in store (test)"));
      case Mode::kWrongBytes: {
        auto bytes = inner.Get(id);
        if (bytes && !bytes->empty()) (*bytes)[0] ^= 0xff;
        return bytes;
      }
      default:
        return inner.Get(id);
    }
  }

  // Counts the call, then Get per id (so each id still goes through the fault modes).
  Result<BlobBatch> GetMany(std::span<const Digest> ids) override {
    ++get_manys;
    return ChunkStore::GetMany(ids);
  }
  // Set `batches` to make the store ask its readers for batches, as a remote tier does.
  bool PrefersBatches() const override { return batches; }

  void set_mode(Mode mode) {
    {
      MutexLock lock(mu_);
      mode_ = mode;
    }
    cv_.notify_all();
  }
  // The next `n` Gets fail with Unavailable (after any hang).
  void FailNext(int n) {
    MutexLock lock(mu_);
    fail_next_ = n;
  }
  // Waits up to `limit` until `n` Gets are hanging.
  bool WaitHanging(int n, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (hanging < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  MemChunkStore inner;
  std::atomic<int> gets{0};       // Gets started
  std::atomic<int> gets_done{0};  // Gets that have returned
  std::atomic<int> get_manys{0};
  std::atomic<bool> batches{false};
  std::atomic<int> hanging{0};
  std::atomic<std::chrono::milliseconds> delay{std::chrono::milliseconds(0)};

 private:
  Mutex mu_;
  std::condition_variable cv_;
  Mode mode_ GUARDED_BY(mu_) = Mode::kNormal;
  int fail_next_ GUARDED_BY(mu_) = 0;
};

// A fixture for tests that mount versions held by a FaultyStore: skipped where /dev/fuse is not
// usable; each test gets a private directory with an empty mountpoint; at the end the store is set
// back to normal (so that hanging fetches return and the mount's threads can be joined) and the
// mount, if any, is stopped and must end cleanly. A subclass's SetUp calls this SetUp first and
// returns if IsSkipped().
class FaultyStoreMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FuseAvailable()) GTEST_SKIP() << "/dev/fuse is not usable here";
    mountpoint_ = dir_.path() / "mnt";
    fs::create_directories(mountpoint_);
  }

  void TearDown() override {
    store_->set_mode(FaultyStore::Mode::kNormal);
    if (mount_) {
      EXPECT_TRUE(StopMount().ok());
    }
  }

  // Mounts `view` at mountpoint_ (which `options.mountpoint` is set to) and waits until the mount
  // is ready. A failed start leaves nothing to stop.
  Status StartMount(std::shared_ptr<VersionView> view, MountOptions options) {
    options.mountpoint = mountpoint_;
    mount_ = std::make_unique<InProcessMount>();
    Status s = mount_->Start(std::move(view), std::move(options));
    if (!s.ok()) mount_.reset();
    return s;
  }

  // Unmounts and returns ServeMount's status.
  Status StopMount() {
    Status s = mount_->Stop();
    mount_.reset();
    return s;
  }

  TempDir dir_;
  std::shared_ptr<FaultyStore> store_ = std::make_shared<FaultyStore>();
  fs::path mountpoint_;
  std::unique_ptr<InProcessMount> mount_;
};

}  // namespace bdn::mount_testing
