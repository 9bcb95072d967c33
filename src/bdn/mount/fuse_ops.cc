// The FUSE low-level operations of one mounted version: lookups, attributes and directory
// listings answered from the loaded manifest, opens and reads through a VolumeReader, every
// modifying operation refused (EROFS), interrupts of dying callers.
#define FUSE_USE_VERSION 314
#include "bdn/mount/fuse_ops.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iterator>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/base/log.h"
#include "bdn/base/units.h"
#include "bdn/mount/chunk_cache.h"
#include "bdn/mount/fuse_mount.h"
#include "bdn/mount/volume_reader.h"

namespace bdn {
namespace fs = std::filesystem;

int ErrnoFromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kNotFound:
      return ENOENT;
    case StatusCode::kInvalidArgument:
      return EINVAL;
    default:
      return EIO;  // Corruption, Unavailable, DeadlineExceeded, Internal, ...
  }
}

bool StatusShowsSigkillPending(std::string_view text) {
  // Signal n is bit n - 1 of the mask; the lowest bits are the last hex digits.
  constexpr int kSigkillDigitFromEnd = (SIGKILL - 1) / 4 + 1;  // 3: the digit holding bit 8
  constexpr unsigned kSigkillBitInDigit = 1u << ((SIGKILL - 1) % 4);
  auto pending = [](std::string_view mask) {
    mask = mask.substr(0, mask.find_last_not_of(" \t\r") + 1);
    if (mask.size() < kSigkillDigitFromEnd ||
        mask.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
      return false;
    }
    unsigned digit = 0;
    auto [end, ec] = std::from_chars(&mask[mask.size() - kSigkillDigitFromEnd],
                                     &mask[mask.size() - kSigkillDigitFromEnd + 1], digit, 16);
    return ec == std::errc() && (digit & kSigkillBitInDigit) != 0;
  };
  for (size_t at = 0; at < text.size();) {
    size_t newline = text.find('\n', at);
    std::string_view line =
        text.substr(at, newline == std::string_view::npos ? newline : newline - at);
    at = newline == std::string_view::npos ? text.size() : newline + 1;
    for (std::string_view name : {"SigPnd:", "ShdPnd:"}) {
      if (!line.starts_with(name)) continue;
      std::string_view value = line.substr(name.size());
      value.remove_prefix(std::min(value.size(), value.find_first_not_of(" \t")));
      if (pending(value)) return true;
    }
  }
  return false;
}

bool ThreadIsDying(pid_t tid) {
  if (tid <= 0) return false;
  const std::string path =
      "/proc/" + std::to_string(tid) + "/task/" + std::to_string(tid) + "/status";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  // The signal lines come early (about 600 bytes in); 4 KiB holds them on every kernel.
  char buf[4096];
  ssize_t n;
  do {
    n = ::read(fd.get(), buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  return n > 0 && StatusShowsSigkillPending(std::string_view(buf, static_cast<size_t>(n)));
}

namespace {

// Sealed data never changes, so the kernel may keep names, attributes and misses for a day.
constexpr double kCacheTimeoutSeconds = 86400.0;
// Except the root's attributes: asking the daemon about them every second costs nothing and
// makes a mount whose daemon died show up as ENOTCONN on stat of the mountpoint.
constexpr double kRootAttrTimeoutSeconds = 1.0;
// The largest FUSE request libfuse 3.14 accepts (256 pages; it sizes its buffers by this).
constexpr unsigned kMaxRequestBytes = 1u << 20;
// Reads closer than this to where the last one ended still count as sequential: the kernel's
// async readahead sends several requests at once and worker threads answer them out of order.
constexpr uint64_t kSequentialSlackBytes = 2ull << 20;
// fuse_reply_iov adds a header iovec and writev allows IOV_MAX (1024); beyond this many pieces
// the reply is copied into one buffer.
constexpr size_t kMaxReplyIov = 256;

// Per open file handle: the file and the state of its sequential-read detector.
struct OpenFile {
  const Entry* entry = nullptr;  // the kFile entry (hardlinks resolved)
  std::shared_ptr<const FileChunks> chunks;
  Mutex mu;
  uint64_t next_offset = 0;    // where the last sequential read ended
  uint64_t prefetched_to = 0;  // prefetch was requested for [.., prefetched_to)
  int streak = 0;              // sequential reads in a row
};

// The file system served by one session. Thread-safe: everything is immutable after
// construction except the VolumeReader, the OpenFile handles and the error-log counters, which
// lock themselves.
// Callbacks that need the store hand their wait to the reader's threads and return, so the
// libfuse workers stay free for metadata requests.
class MountedFs final : public FuseFileSystem {
 public:
  MountedFs(std::shared_ptr<VersionView> view, const MountOptions& options, fs::path mountpoint)
      : view_(std::move(view)),
        reader_(view_, options),
        mountpoint_(std::move(mountpoint)),
        prefetch_bytes_(options.prefetch_bytes),
        unrecorded_mtime_ns_(options.unrecorded_mtime_ns),
        uid_(::getuid()),
        gid_(::getgid()) {
    root_ = view_->Find("");
    // One pass over the entries for link counts (no I/O): files count their hardlinks,
    // directories their subdirectories.
    const auto& entries = view_->manifest().entries;
    nlink_.assign(entries.size(), 1);
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      if (e.kind == EntryKind::kDirectory) nlink_[i] += 1;
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      if (e.kind == EntryKind::kHardlink) {
        const Entry& target = view_->Resolve(e);
        if (&target != &e) ++nlink_[view_->IndexOf(target)];
      } else if (e.kind == EntryKind::kDirectory) {
        size_t slash = e.path.rfind('/');
        if (slash == std::string::npos) {
          ++root_nlink_;
        } else if (const Entry* parent = view_->Find(std::string_view(e.path).substr(0, slash))) {
          ++nlink_[view_->IndexOf(*parent)];
        }
      } else if (e.kind == EntryKind::kFile) {
        // Saturating: sizes come from the manifest.
        total_bytes_ =
            e.size_bytes > UINT64_MAX - total_bytes_ ? UINT64_MAX : total_bytes_ + e.size_bytes;
      }
    }
  }

  ~MountedFs() { Stop(); }

  const fs::path& mountpoint() const { return mountpoint_; }

  // Once the session loop has ended: ends every wait and answers what is still pending.
  // Idempotent.
  void Stop() override {
    {
      MutexLock lock(watch_mu_);
      watch_stopping_ = true;
    }
    watch_cv_.notify_all();
    if (watcher_.joinable()) watcher_.join();
    reader_.Stop();
  }

  // --- callbacks; each replies exactly once ---

  void Init(fuse_conn_info* conn) {
    // libfuse derives max_pages from max_write (clamped to its 1 MiB buffers); max_read is left
    // unlimited, so READ requests go up to 1 MiB.
    conn->max_write = kMaxRequestBytes;
    // libfuse clamps this to what the kernel offered (the bdi default, 128 KiB); the window is
    // raised afterwards through sysfs (SetBdiReadAhead).
    conn->max_readahead = UINT_MAX;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
    conn->time_gran = 1;
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    // An O_DIRECT read sent as background requests (async DIO, libfuse's default) waits for
    // them uninterruptibly and the kernel never sends FUSE_INTERRUPT for them: a reader killed
    // while its bytes are fetched would stay in state D until the read deadline. Synchronous
    // requests are interrupted, and a killed reader's is answered EINTR at once (OnInterrupt).
    conn->want &= ~FUSE_CAP_ASYNC_DIO;
  }

  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    const Entry* dir = EntryOf(parent);
    if (dir == nullptr) return (void)fuse_reply_err(req, ENOENT);
    if (dir->kind != EntryKind::kDirectory) return (void)fuse_reply_err(req, ENOTDIR);
    std::string path = dir->path.empty() ? std::string(name) : dir->path + "/" + name;
    fuse_entry_param param{};
    param.entry_timeout = kCacheTimeoutSeconds;  // ino 0 with a timeout: a cached miss
    if (const Entry* e = view_->Find(path)) {
      param.attr = Attr(*e);
      param.ino = param.attr.st_ino;
      param.attr_timeout = kCacheTimeoutSeconds;
    }
    fuse_reply_entry(req, &param);
  }

  void Getattr(fuse_req_t req, fuse_ino_t ino) {
    const Entry* e = EntryOf(ino);
    if (e == nullptr) return (void)fuse_reply_err(req, ENOENT);
    struct stat st = Attr(*e);
    fuse_reply_attr(req, &st, ino == FUSE_ROOT_ID ? kRootAttrTimeoutSeconds : kCacheTimeoutSeconds);
  }

  void Readlink(fuse_req_t req, fuse_ino_t ino) {
    const Entry* e = EntryOf(ino);
    if (e == nullptr) return (void)fuse_reply_err(req, ENOENT);
    if (e->kind != EntryKind::kSymlink) return (void)fuse_reply_err(req, EINVAL);
    fuse_reply_readlink(req, e->target.c_str());
  }

  void Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    const Entry* e = EntryOf(ino);
    if (e == nullptr) return (void)fuse_reply_err(req, ENOENT);
    if (e->kind != EntryKind::kDirectory) return (void)fuse_reply_err(req, ENOTDIR);
    fi->fh = 0;
    fi->cache_readdir = 1;  // the kernel may keep the listing...
    fi->keep_cache = 1;     // ...across opendir calls
    fuse_reply_open(req, fi);
  }

  // Directory offsets: 0 ".", 1 "..", 2 + i the i-th child in path order; each entry carries
  // the offset of the one after it.
  void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset) {
    const Entry* dir = EntryOf(ino);
    if (dir == nullptr) return (void)fuse_reply_err(req, ENOENT);
    if (dir->kind != EntryKind::kDirectory) return (void)fuse_reply_err(req, ENOTDIR);
    const std::vector<size_t>& children = view_->Children(dir->path);
    const auto& entries = view_->manifest().entries;
    std::vector<char> buf(size);
    size_t used = 0;
    for (uint64_t i = offset < 0 ? 0 : static_cast<uint64_t>(offset); i < children.size() + 2;
         ++i) {
      struct stat st {};
      std::string_view name;
      if (i == 0) {
        name = ".";
        st.st_ino = InoOf(*dir);
        st.st_mode = S_IFDIR;
      } else if (i == 1) {
        name = "..";
        st.st_ino = ParentIno(*dir);
        st.st_mode = S_IFDIR;
      } else {
        const Entry& child = entries[children[i - 2]];
        size_t slash = child.path.rfind('/');
        name = slash == std::string::npos ? std::string_view(child.path)
                                          : std::string_view(child.path).substr(slash + 1);
        st.st_ino = InoOf(child);
        st.st_mode = TypeBits(view_->Resolve(child));
      }
      std::string name_z(name);
      size_t n = fuse_add_direntry(req, buf.data() + used, size - used, name_z.c_str(), &st,
                                   static_cast<off_t>(i + 1));
      if (n > size - used) break;
      used += n;
    }
    fuse_reply_buf(req, buf.data(), used);
  }

  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    const Entry* found = EntryOf(ino);
    if (found == nullptr) return (void)fuse_reply_err(req, ENOENT);
    const Entry& e = view_->Resolve(*found);
    if (e.kind == EntryKind::kDirectory) return (void)fuse_reply_err(req, EISDIR);
    if (e.kind != EntryKind::kFile) return (void)fuse_reply_err(req, EINVAL);
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
      return (void)fuse_reply_err(req, EROFS);
    }
    if (auto known = reader_.KnownChunks(e)) return ReplyOpen(req, *fi, e, std::move(known));
    // The chunk index must come from the store: wait for it off this thread. libfuse's `fi`
    // lives only during this call, so the reply gets a copy.
    auto deadline = reader_.Deadline();
    Offload(req, [this, info = *fi, &e, deadline](WaitingRequest& w) {
      auto chunks = reader_.ChunksOf(e, deadline, w.stop.get_token());
      if (!Claim(w)) return;  // interrupted: answered already
      if (!chunks) return ReplyStoreError(w.req, chunks.error());
      ReplyOpen(w.req, info, e, std::move(*chunks));
    });
  }

  void Release(fuse_req_t req, fuse_file_info* fi) {
    delete reinterpret_cast<OpenFile*>(fi->fh);
    fuse_reply_err(req, 0);
  }

  void Read(fuse_req_t req, size_t size, off_t offset, fuse_file_info* fi) {
    OpenFile& of = *reinterpret_cast<OpenFile*>(fi->fh);
    const Entry& e = *of.entry;
    if (offset < 0) return (void)fuse_reply_err(req, EINVAL);
    uint64_t begin = static_cast<uint64_t>(offset);
    if (begin >= e.size_bytes || size == 0) return (void)fuse_reply_buf(req, nullptr, 0);
    uint64_t end = std::min<uint64_t>(e.size_bytes, begin + size);

    Stream stream = DetectStream(of, begin, end);
    AccessPattern pattern = stream.pattern;
    if (auto held = reader_.ChunksNow(*of.chunks, begin, end, pattern)) {
      reader_.cache().Prefetch(stream.ahead);
      return ReplyChunks(req, *of.chunks, *held, begin, end);
    }
    // A miss. This read's own fetches are queued before the prefetches, so they come first and
    // a prefetch never takes (and swallows the error of) a chunk this read needs. Then the wait
    // goes off this thread; the task keeps its own reference to the chunk list.
    reader_.RequestChunks(*of.chunks, begin, end, pattern);
    reader_.cache().Prefetch(stream.ahead);
    auto deadline = reader_.Deadline();
    Offload(req, [this, &e, chunks = of.chunks, begin, end, pattern, deadline](WaitingRequest& w) {
      auto held = reader_.Chunks(*chunks, begin, end, pattern, deadline, w.stop.get_token());
      if (!Claim(w)) return;  // interrupted: answered already
      if (!held) {
        return ReplyStoreError(
            w.req, held.error().WithPrefix("file \"" + e.path + "\" [" + std::to_string(begin) +
                                           ", " + std::to_string(end) + ")"));
      }
      ReplyChunks(w.req, *chunks, *held, begin, end);
    });
  }

  void Statfs(fuse_req_t req) {
    struct statvfs st {};
    st.f_bsize = 4096;
    st.f_frsize = 4096;
    st.f_blocks = total_bytes_ / 4096 + (total_bytes_ % 4096 != 0);
    st.f_files = view_->manifest().entries.size() + 1;
    st.f_namemax = 255;
    fuse_reply_statfs(req, &st);
  }

  // A read or open that could not get its bytes (or chunk index) from the store: EIO whatever
  // the cause (a chunk missing from the store is not a missing file), reported on stderr for
  // the operator (a bad disk or tier, an origin that is away).
  void ReplyStoreError(fuse_req_t req, const Status& status) {
    LogStoreError(status);
    fuse_reply_err(req, EIO);
  }

 private:
  // A request whose answer waits on the store. The kernel interrupts it (FUSE_INTERRUPT) when
  // the calling thread gets any signal; only a dying caller (a reader killed with SIGKILL,
  // which cannot exit before its request is answered) has it ended.
  struct WaitingRequest {
    WaitingRequest(fuse_req_t r, pid_t t) : req(r), tid(t) {}
    const fuse_req_t req;
    const pid_t tid;        // the calling thread (fuse_req_ctx), for ThreadIsDying
    std::stop_source stop;  // requested once the caller is dying: ends the request's waits
    std::atomic<bool> answered{false};
  };

  // An interrupted request whose caller is checked (ThreadIsDying) at `next`, then `period`
  // later; the period doubles up to kMaxWatchPeriod.
  struct Watched {
    std::shared_ptr<WaitingRequest> w;
    std::chrono::steady_clock::time_point next;
    std::chrono::steady_clock::duration period;
  };
  // The first check comes at once, the next ones 5, 10, 20, 40 ms apart (the kernel may send
  // the interrupt just before it marks a dying thread), then every 100 ms until the request is
  // answered (a thread that handled a signal and is killed afterwards gets no new interrupt):
  // a killed caller waits at most about that long.
  static constexpr std::chrono::milliseconds kFirstWatchPeriod{5};
  static constexpr std::chrono::milliseconds kMaxWatchPeriod{100};

  // Whoever gets true (the waiting task or the interrupt) replies to w.req, exactly once.
  bool Claim(WaitingRequest& w) {
    if (w.answered.exchange(true)) return false;
    MutexLock lock(waiting_mu_);
    waiting_.erase(w.req);
    return true;
  }

  // libfuse's interrupt callback: hands the request to the watcher, which checks its caller at
  // once and then until the request is answered. It does no I/O here: libfuse holds the
  // request's lock while this runs. A request already answered is no longer in waiting_ (Claim
  // removes it before the reply), so a late interrupt finds nothing.
  static void OnInterrupt(fuse_req_t req, void* data) {
    auto* self = static_cast<MountedFs*>(data);
    std::shared_ptr<WaitingRequest> w;
    {
      MutexLock lock(self->waiting_mu_);
      auto it = self->waiting_.find(req);
      if (it == self->waiting_.end()) return;
      w = it->second;
    }
    {
      MutexLock lock(self->watch_mu_);
      if (self->watch_stopping_) return;  // Stop answers every waiting request
      self->watched_.push_back({std::move(w), std::chrono::steady_clock::now(), kFirstWatchPeriod});
    }
    self->watch_cv_.notify_one();
  }

  // The watcher thread: checks the callers of interrupted requests (Watched) until each request
  // is answered. A dying caller's request has its waits woken (the fetches only it had queued
  // are withdrawn) and is answered EINTR at once, even if its task has not started yet (queued
  // behind other waits); any other caller's request goes on as if it had not been interrupted.
  void WatchInterrupted() {
    using SteadyClock = std::chrono::steady_clock;
    MutexLock lock(watch_mu_);
    while (!watch_stopping_) {
      if (watched_.empty()) {
        watch_cv_.wait(lock.native(), [&] { return watch_stopping_ || !watched_.empty(); });
        continue;
      }
      auto now = SteadyClock::now();
      std::vector<std::shared_ptr<WaitingRequest>> due;
      auto next = SteadyClock::time_point::max();
      std::erase_if(watched_, [](const Watched& x) { return x.w->answered.load(); });
      for (Watched& x : watched_) {
        if (x.next <= now) {
          due.push_back(x.w);
          x.next = now + x.period;
          x.period = std::min<SteadyClock::duration>(2 * x.period, kMaxWatchPeriod);
        }
        next = std::min(next, x.next);
      }
      if (!due.empty()) {
        lock.Unlock();
        for (const auto& w : due) {
          if (w->answered || !ThreadIsDying(w->tid)) continue;
          // Claimed first, so the woken task (its wait "cancelled") does not answer it EIO.
          if (!Claim(*w)) continue;
          w->stop.request_stop();
          fuse_reply_err(w->req, EINTR);
        }
        lock.Lock();
        continue;
      }
      // A newly interrupted request (due at once) wakes this early.
      if (next != SteadyClock::time_point::max()) watch_cv_.wait_until(lock.native(), next);
    }
  }

  // Runs `fn(WaitingRequest&)` on the reader's waiting threads; `fn` waits with the request's
  // stop token and replies only after Claim. From here on `req` may be answered (EINTR) at any
  // moment, so the caller must not touch it after this call. An exception in `fn` (bad_alloc)
  // still gets the request its one reply.
  template <typename F>
  void Offload(fuse_req_t req, F fn) {
    auto w = std::make_shared<WaitingRequest>(req, fuse_req_ctx(req)->pid);
    {
      MutexLock lock(waiting_mu_);
      waiting_[req] = w;
    }
    // Calls OnInterrupt at once if the interrupt came first.
    fuse_req_interrupt_func(req, &MountedFs::OnInterrupt, this);
    reader_.Submit([this, w, fn = std::move(fn)]() mutable {
      if (w->answered) return;  // interrupted while queued
      try {
        fn(*w);
      } catch (const std::exception& e) {
        log::Error("mount " + mountpoint_.string() + ": internal error: " + e.what());
        if (Claim(*w)) fuse_reply_err(w->req, EIO);
      }
    });
  }

  // Every Corruption is reported; other errors (an origin away: every read fails, and kernel
  // readahead multiplies them) at most kLogBurst per kLogWindow, then as a count.
  void LogStoreError(const Status& status) {
    const std::string line = "mount " + mountpoint_.string() + ": " + status.ToString();
    if (status.code() == StatusCode::kCorruption) return log::Error(line);
    read_errors_.Write(log::Level::kWarn, line);
  }

  // `e` is the resolved kFile entry; `info` the open's file info.
  void ReplyOpen(fuse_req_t req, fuse_file_info info, const Entry& e,
                 std::shared_ptr<const FileChunks> chunks) {
    auto of = std::make_unique<OpenFile>();
    of->entry = &e;
    of->chunks = std::move(chunks);
    info.fh = reinterpret_cast<uint64_t>(of.get());
    info.keep_cache = 1;
    info.noflush = 1;
    // A failed reply (the open was interrupted) means no release will come for this handle.
    if (fuse_reply_open(req, &info) == 0) of.release();
  }

  // Replies with [begin, end) of the file from `held`, the chunks of `fc` covering it.
  static void ReplyChunks(fuse_req_t req, const FileChunks& fc, const std::vector<ChunkBytes>& held,
                          uint64_t begin, uint64_t end) {
    size_t first = fc.ChunkAt(begin);
    std::vector<iovec> iov;
    iov.reserve(held.size());
    for (size_t k = 0; k < held.size(); ++k) {
      size_t i = first + k;
      uint64_t lo = std::max(begin, fc.offsets[i]) - fc.offsets[i];
      uint64_t hi = std::min(end, fc.offsets[i + 1]) - fc.offsets[i];
      iov.push_back({const_cast<uint8_t*>(held[k]->data()) + lo, static_cast<size_t>(hi - lo)});
    }
    if (iov.size() <= kMaxReplyIov) {
      fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
      return;
    }
    std::vector<char> flat(end - begin);
    size_t at = 0;
    for (const iovec& v : iov) {
      std::memcpy(flat.data() + at, v.iov_base, v.iov_len);
      at += v.iov_len;
    }
    fuse_reply_buf(req, flat.data(), flat.size());
  }

  const Entry* EntryOf(fuse_ino_t ino) const {
    if (ino == FUSE_ROOT_ID) return root_;
    const auto& entries = view_->manifest().entries;
    if (ino < 2 || ino - 2 >= entries.size()) return nullptr;
    return &entries[ino - 2];
  }

  fuse_ino_t InoOf(const Entry& entry) const {
    const Entry& e = view_->Resolve(entry);
    if (&e == root_) return FUSE_ROOT_ID;
    return view_->IndexOf(e) + 2;
  }

  fuse_ino_t ParentIno(const Entry& dir) const {
    size_t slash = dir.path.rfind('/');
    if (dir.path.empty() || slash == std::string::npos) return FUSE_ROOT_ID;
    const Entry* parent = view_->Find(std::string_view(dir.path).substr(0, slash));
    return parent ? InoOf(*parent) : FUSE_ROOT_ID;
  }

  static mode_t TypeBits(const Entry& e) {
    switch (e.kind) {
      case EntryKind::kDirectory:
        return S_IFDIR;
      case EntryKind::kSymlink:
        return S_IFLNK;
      default:
        return S_IFREG;
    }
  }

  struct stat Attr(const Entry& entry) const {
    const Entry& e = view_->Resolve(entry);
    struct stat st {};
    st.st_ino = InoOf(e);
    st.st_uid = uid_;
    st.st_gid = gid_;
    st.st_blksize = 4096;
    uint16_t perm = e.mode & 07777;
    switch (e.kind) {
      case EntryKind::kDirectory:
        st.st_mode = S_IFDIR | perm;
        st.st_nlink = &e == root_ ? root_nlink_ : nlink_[view_->IndexOf(e)];
        st.st_size = 4096;
        break;
      case EntryKind::kSymlink:
        st.st_mode = S_IFLNK | (perm != 0 ? perm : 0777);
        st.st_nlink = 1;
        st.st_size = static_cast<off_t>(e.target.size());
        break;
      default:
        st.st_mode = S_IFREG | perm;
        st.st_nlink = nlink_[view_->IndexOf(e)];
        st.st_size = static_cast<off_t>(e.size_bytes);
        break;
    }
    // Rounded up without overflow: a file may be 2^63-1 bytes.
    st.st_blocks = st.st_size / 512 + (st.st_size % 512 != 0);
    st.st_mtim = ToTimespec(e.mtime_ns.value_or(unrecorded_mtime_ns_));
    st.st_atim = st.st_mtim;
    st.st_ctim = st.st_mtim;
    return st;
  }

  // What a read is part of, and the chunks to fetch ahead of it.
  struct Stream {
    AccessPattern pattern = AccessPattern::kRandom;
    std::span<const ChunkRef> ahead;  // to prefetch (may include this read's last chunk)
  };

  // Sequential-read detection per handle: once reads follow each other, the chunks of a window
  // past this read (doubling from 2 MiB up to prefetch_bytes_) are to be fetched ahead. The
  // window is topped up only once less than half of it is left ahead of the reader, so that
  // each top-up is at least half a window: one large batch (one request to a remote tier)
  // rather than a chunk or two per read.
  Stream DetectStream(OpenFile& of, uint64_t begin, uint64_t end) {
    uint64_t size = of.entry->size_bytes;
    uint64_t from = 0;
    uint64_t to = 0;
    {
      MutexLock lock(of.mu);
      bool sequential = begin + kSequentialSlackBytes >= of.next_offset &&
                        begin <= of.next_offset + kSequentialSlackBytes;
      if (!sequential) {
        of.streak = 0;
        of.next_offset = end;
        of.prefetched_to = 0;
        return {};
      }
      of.streak = std::min(of.streak + 1, 16);
      of.next_offset = std::max(of.next_offset, end);
      if (prefetch_bytes_ == 0) return {AccessPattern::kSequential, {}};
      uint64_t window = std::min<uint64_t>(prefetch_bytes_, (1ull << 20) << std::min(of.streak, 8));
      if (of.prefetched_to > end && of.prefetched_to - end >= window / 2) {
        return {AccessPattern::kSequential, {}};
      }
      from = std::max(end, of.prefetched_to);
      to = std::min(size, end + window);
      if (from >= to) return {AccessPattern::kSequential, {}};
      of.prefetched_to = to;
    }
    const FileChunks& fc = *of.chunks;
    size_t i = fc.ChunkAt(from);
    size_t j = fc.ChunkAt(to - 1);
    return {AccessPattern::kSequential, std::span<const ChunkRef>(fc.chunks).subspan(i, j - i + 1)};
  }

  std::shared_ptr<VersionView> view_;
  VolumeReader reader_;
  fs::path mountpoint_;
  uint64_t prefetch_bytes_;
  int64_t unrecorded_mtime_ns_;
  uid_t uid_;
  gid_t gid_;
  const Entry* root_ = nullptr;
  std::vector<uint32_t> nlink_;  // by entry index
  uint32_t root_nlink_ = 2;
  uint64_t total_bytes_ = 0;

  // Requests waiting on the store that no one has answered yet, for OnInterrupt.
  Mutex waiting_mu_;
  std::unordered_map<fuse_req_t, std::shared_ptr<WaitingRequest>> waiting_;

  // Read errors other than corruption (an origin away: every read fails, and kernel readahead
  // multiplies them): at most 20 lines per 10 s. Every corruption is logged.
  log::RateLimiter read_errors_{20, std::chrono::seconds(10)};

  // Interrupted requests whose callers the watcher checks (WatchInterrupted).
  Mutex watch_mu_;
  std::condition_variable watch_cv_;
  std::vector<Watched> watched_;
  bool watch_stopping_ = false;
  std::thread watcher_{[this] { WatchInterrupted(); }};
};

// The userdata of every request is the session's FuseFileSystem, which is a MountedFs.
MountedFs& FsOf(fuse_req_t req) {
  return *static_cast<MountedFs*>(static_cast<FuseFileSystem*>(fuse_req_userdata(req)));
}

// Library exceptions stop at the callback edge and become EIO.
template <typename F>
void Guard(fuse_req_t req, F&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    log::Error(std::string("mount: internal error: ") + e.what());
    fuse_reply_err(req, EIO);
  }
}

void ReplyReadOnly(fuse_req_t req) { fuse_reply_err(req, EROFS); }

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops{};
  ops.init = [](void* userdata, fuse_conn_info* conn) {
    static_cast<MountedFs*>(static_cast<FuseFileSystem*>(userdata))->Init(conn);
  };
  ops.lookup = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    Guard(req, [&] { FsOf(req).Lookup(req, parent, name); });
  };
  ops.getattr = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
    Guard(req, [&] { FsOf(req).Getattr(req, ino); });
  };
  ops.readlink = [](fuse_req_t req, fuse_ino_t ino) {
    Guard(req, [&] { FsOf(req).Readlink(req, ino); });
  };
  ops.opendir = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    Guard(req, [&] { FsOf(req).Opendir(req, ino, fi); });
  };
  ops.readdir = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
    Guard(req, [&] { FsOf(req).Readdir(req, ino, size, off); });
  };
  ops.releasedir = [](fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); };
  ops.open = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    Guard(req, [&] { FsOf(req).Open(req, ino, fi); });
  };
  ops.read = [](fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
    Guard(req, [&] { FsOf(req).Read(req, size, off, fi); });
  };
  ops.release = [](fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    Guard(req, [&] { FsOf(req).Release(req, fi); });
  };
  ops.statfs = [](fuse_req_t req, fuse_ino_t) { Guard(req, [&] { FsOf(req).Statfs(req); }); };
  // Everything that would modify the tree. The mount is "ro", so the kernel normally answers
  // these itself; the daemon agrees in case it is asked anyway.
  ops.setattr = [](fuse_req_t req, fuse_ino_t, struct stat*, int, fuse_file_info*) {
    ReplyReadOnly(req);
  };
  ops.mknod = [](fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { ReplyReadOnly(req); };
  ops.mkdir = [](fuse_req_t req, fuse_ino_t, const char*, mode_t) { ReplyReadOnly(req); };
  ops.unlink = [](fuse_req_t req, fuse_ino_t, const char*) { ReplyReadOnly(req); };
  ops.rmdir = [](fuse_req_t req, fuse_ino_t, const char*) { ReplyReadOnly(req); };
  ops.symlink = [](fuse_req_t req, const char*, fuse_ino_t, const char*) { ReplyReadOnly(req); };
  ops.rename = [](fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned int) {
    ReplyReadOnly(req);
  };
  ops.link = [](fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { ReplyReadOnly(req); };
  ops.write = [](fuse_req_t req, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) {
    ReplyReadOnly(req);
  };
  ops.create = [](fuse_req_t req, fuse_ino_t, const char*, mode_t, fuse_file_info*) {
    ReplyReadOnly(req);
  };
  ops.setxattr = [](fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) {
    ReplyReadOnly(req);
  };
  ops.removexattr = [](fuse_req_t req, fuse_ino_t, const char*) { ReplyReadOnly(req); };
  ops.fallocate = [](fuse_req_t req, fuse_ino_t, int, off_t, off_t, fuse_file_info*) {
    ReplyReadOnly(req);
  };
  ops.copy_file_range = [](fuse_req_t req, fuse_ino_t, off_t, fuse_file_info*, fuse_ino_t, off_t,
                           fuse_file_info*, size_t, int) { ReplyReadOnly(req); };
  return ops;
}

}  // namespace

std::unique_ptr<FuseFileSystem> FuseFileSystem::Create(std::shared_ptr<VersionView> view,
                                                       const MountOptions& options,
                                                       std::filesystem::path mountpoint) {
  return std::make_unique<MountedFs>(std::move(view), options, std::move(mountpoint));
}

fuse_lowlevel_ops FuseFileSystem::Ops() { return MakeOps(); }

}  // namespace bdn
