#include "bdn/volume/push.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_set>

#include "bdn/base/dir_fd.h"
#include "bdn/base/fd.h"
#include "bdn/base/log.h"
#include "bdn/base/text.h"  // IsValidUtf8
#include "bdn/base/thread_pool.h"
#include "bdn/format/chunk_index.h"
#include "bdn/volume/version_check.h"

namespace bdn {
namespace fs = std::filesystem;
namespace {

constexpr size_t kBlockBytes = 8 * 1024 * 1024;
constexpr size_t kMaxBlocksInFlight = 4;
// Threads storing the chunks a block's FindMissing reported. A remote store answers each Put
// after a network round trip, so a block's ~128 chunks (64 KiB average) go out many at a time
// instead of one after another; a local store gets parallel writes.
constexpr int kUploadThreads = 16;

// Lists the tree below `root` (never following symlinks) into `out`, sorted bytewise by path
// (the manifest's order). Every step is relative to a directory handle, so any depth and path
// length the file system holds works, in time linear in the tree. Names and symlink targets
// must be UTF-8 (docs/format.md); other file types are refused, unless `list_others`: then
// sockets, FIFOs and devices are listed as they are, and names and symlink targets need not be
// UTF-8 (for a caller that keeps regular files only and checks their paths).
Status Walk(DirCursor& cursor, std::vector<ScannedEntry>& out,
            const std::vector<RefusedDir>& refused_dirs = {}, bool list_others = false) {
  struct Level {
    std::vector<std::string> names;
    size_t next = 0;
  };
  std::vector<Level> levels;
  BDN_ASSIGN_OR_RETURN(auto top, ListNames(cursor.fd(), cursor.Display()));
  levels.push_back({std::move(top)});
  while (!levels.empty()) {
    Level& level = levels.back();
    if (level.next == level.names.size()) {
      levels.pop_back();
      if (!levels.empty()) BDN_RETURN_IF_ERROR(cursor.Up());
      continue;
    }
    const std::string& name = level.names[level.next++];
    ScannedEntry item;
    item.path = cursor.rel().empty() ? name : cursor.rel() + "/" + name;
    // Messages carry names as they are; the CLI escapes what it prints (EscapeName).
    auto shown = [&] { return cursor.Display(name); };
    if (::fstatat(cursor.fd(), name.c_str(), &item.st, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoError("path \"" + shown() + "\"", errno);
    }
    mode_t t = item.st.st_mode & S_IFMT;
    // With `list_others`, the caller keeps regular files only and checks their paths, so a
    // directory, symlink or special file whose name is not UTF-8 is listed as it is: a directory
    // holding nothing the caller keeps is no error.
    if (!list_others && !IsValidUtf8(name)) {
      return InvalidArgumentError("path \"" + shown() + "\": name is not valid UTF-8");
    }
    const char* refused = t == S_IFSOCK                    ? "a socket"
                          : t == S_IFIFO                   ? "a FIFO"
                          : (t == S_IFCHR || t == S_IFBLK) ? "a device"
                                                           : nullptr;
    if (refused && !list_others) {
      return InvalidArgumentError("path \"" + shown() + "\": is " + refused +
                                  "; only regular files, directories and symlinks can be pushed");
    }
    if (t == S_IFLNK) {
      std::string target(static_cast<size_t>(item.st.st_size) + 1, '\0');
      ssize_t n = ::readlinkat(cursor.fd(), name.c_str(), target.data(), target.size());
      if (n < 0) return ErrnoError("symlink \"" + shown() + "\"", errno);
      if (static_cast<size_t>(n) >= target.size()) {
        return FailedPreconditionError("symlink \"" + shown() + "\": changed while being pushed");
      }
      target.resize(static_cast<size_t>(n));
      if (!list_others && !IsValidUtf8(target)) {
        return InvalidArgumentError("symlink \"" + shown() + "\": target \"" + target +
                                    "\" is not valid UTF-8");
      }
      item.target = std::move(target);
    }
    if (t == S_IFDIR) {
      for (const RefusedDir& r : refused_dirs) {
        if (item.st.st_dev == r.dev && item.st.st_ino == r.ino) {
          return InvalidArgumentError("path \"" + shown() + "\": is " + r.what + r.hint);
        }
      }
    }
    out.push_back(std::move(item));
    if (t == S_IFDIR) {
      BDN_RETURN_IF_ERROR(cursor.Down(name));  // `level` dangles after the push_back below
      BDN_ASSIGN_OR_RETURN(auto names, ListNames(cursor.fd(), cursor.Display()));
      levels.push_back({std::move(names)});
    }
  }
  // Depth-first order puts "a/x" before "a-b" ('-' < '/'); the manifest wants plain byte order.
  std::sort(out.begin(), out.end(),
            [](const ScannedEntry& a, const ScannedEntry& b) { return a.path < b.path; });
  return Status::Ok();
}

// InvalidArgument if the directory open at `fd` (named `dir`), or one above it (found through
// "..", which is how the kernel goes up, whatever path led here), is a refused directory.
Status CheckNotRefused(int fd, const fs::path& dir, const std::vector<RefusedDir>& refused) {
  if (refused.empty()) return Status::Ok();
  const std::string shown = "directory \"" + dir.string() + "\"";
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(shown, errno);
  UniqueFd up;  // the directory above the one `st` describes
  for (int depth = 0; depth < 4096; ++depth) {
    for (const RefusedDir& r : refused) {
      if (st.st_dev == r.dev && st.st_ino == r.ino) {
        return InvalidArgumentError(shown + ": is " + (depth == 0 ? "" : "inside ") + r.what +
                                    r.hint);
      }
    }
    UniqueFd parent(::openat(up.valid() ? up.get() : fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    struct stat pst;
    if (!parent.valid() || ::fstat(parent.get(), &pst) != 0) return Status::Ok();  // unreadable
    if (pst.st_dev == st.st_dev && pst.st_ino == st.st_ino) return Status::Ok();   // the root
    st = pst;
    up = std::move(parent);
  }
  return Status::Ok();
}

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct Tally {
  uint64_t chunks_uploaded = 0;
  uint64_t bytes_uploaded = 0;  // data chunks and metadata blobs
  uint64_t chunks_reused = 0;
  uint64_t metadata_bytes_uploaded = 0;
  void Add(const Tally& o) {
    chunks_uploaded += o.chunks_uploaded;
    bytes_uploaded += o.bytes_uploaded;
    chunks_reused += o.chunks_reused;
    metadata_bytes_uploaded += o.metadata_bytes_uploaded;
  }
};

// A read buffer whose bytes are not zero-initialized; recycled through BufferPool.
struct Block {
  std::unique_ptr<uint8_t[]> bytes;
  size_t capacity = 0;
  size_t size = 0;
  const uint8_t* data() const { return bytes.get(); }
  uint8_t* data() { return bytes.get(); }
};

// Recycles block buffers so a large push does not fault in fresh pages for every block.
// Thread-safe.
class BufferPool {
 public:
  std::shared_ptr<Block> Get(size_t capacity) {
    std::unique_ptr<Block> b;
    {
      MutexLock lock(mu_);
      if (!free_.empty()) {
        b = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!b || b->capacity < capacity) {
      b = std::make_unique<Block>();
      b->bytes.reset(new uint8_t[capacity]);
      b->capacity = capacity;
    }
    b->size = 0;
    return std::shared_ptr<Block>(b.release(),
                                  [this](Block* p) { Put(std::unique_ptr<Block>(p)); });
  }

 private:
  void Put(std::unique_ptr<Block> b) {
    MutexLock lock(mu_);
    if (free_.size() < 64) free_.push_back(std::move(b));
  }
  Mutex mu_;
  std::vector<std::unique_ptr<Block>> free_ GUARDED_BY(mu_);
};

// Shared state of one seal operation. Thread-safe.
class Sealer {
 public:
  Sealer(const SealOptions& options, ChunkStore& store, TransferCounters* counters)
      : chunker_(options.chunker),
        store_(store),
        counters_(counters),
        jobs_(options.jobs > 0 ? options.jobs : ThreadPool::DefaultThreads()),
        upload_pool_(kUploadThreads, kUploadThreads * 4),
        chunk_pool_(jobs_, jobs_ * kMaxBlocksInFlight) {}

  int jobs() const { return jobs_; }

  struct BlockOut {
    std::vector<ChunkRef> refs;
    Tally tally;
    Status status;
  };

  // Hashes the chunks [cuts[i], cuts[i+1]) of `buf`, asks the store which it lacks in one batch,
  // and stores those.
  BlockOut StoreChunks(const Block& buf, const std::vector<size_t>& cuts) {
    BlockOut out;
    const size_t n = cuts.size() - 1;
    out.refs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      std::span<const uint8_t> chunk(buf.data() + cuts[i], cuts[i + 1] - cuts[i]);
      out.refs.push_back({Digest::Of(chunk), static_cast<uint32_t>(chunk.size())});
    }
    // Chunks this seal already handled are reused without asking the store again.
    std::vector<Digest> fresh;
    std::vector<size_t> fresh_at;
    {
      MutexLock lock(mu_);
      for (size_t i = 0; i < n; ++i) {
        if (seen_.insert(out.refs[i].id).second) {
          fresh.push_back(out.refs[i].id);
          fresh_at.push_back(i);
        }
      }
    }
    out.tally.chunks_reused += n - fresh.size();
    if (fresh.empty()) return out;
    auto missing = store_.FindMissing(fresh);
    if (!missing) {
      out.status = missing.error();
      return out;
    }
    std::unordered_set<Digest> want(missing->begin(), missing->end());
    std::vector<BlobPut> upload;
    for (size_t k = 0; k < fresh.size(); ++k) {
      if (!want.erase(fresh[k])) {
        ++out.tally.chunks_reused;
        continue;
      }
      size_t i = fresh_at[k];
      upload.push_back({fresh[k], {buf.data() + cuts[i], cuts[i + 1] - cuts[i]}});
      ++out.tally.chunks_uploaded;
      out.tally.bytes_uploaded += upload.back().data.size();
    }
    // A store that takes many blobs per round trip (a remote one) gets them in groups of its
    // PutBatchBytes, several groups at once; any other, one Put per chunk, many at once.
    const size_t group_bytes = store_.PutBatchBytes();
    std::vector<std::future<Status>> puts;
    for (size_t start = 0; start < upload.size();) {
      size_t end = start + 1, bytes = upload[start].data.size();
      while (group_bytes > 0 && end < upload.size() &&
             bytes + upload[end].data.size() <= group_bytes) {
        bytes += upload[end++].data.size();
      }
      std::span<const BlobPut> group(upload.data() + start, end - start);
      puts.push_back(upload_pool_.Submit([this, group, bytes] {
        Status s =
            group.size() == 1 ? store_.Put(group[0].id, group[0].data) : store_.PutMany(group);
        if (s.ok() && counters_) counters_->bytes_uploaded += bytes;
        return s;
      }));
      start = end;
    }
    // Every Put reads `buf`: wait for all of them, even after a failure.
    for (auto& p : puts) {
      Status s = p.get();
      if (!s.ok() && out.status.ok()) out.status = s;
    }
    return out;
  }

  // Stores a metadata blob (chunk index) unless this seal or the store already has it.
  Status PutMetadata(const Digest& id, std::span<const uint8_t> data, Tally& tally) {
    {
      MutexLock lock(mu_);
      if (!seen_.insert(id).second) return Status::Ok();
    }
    BDN_ASSIGN_OR_RETURN(bool has, store_.Contains(id));
    if (has) return Status::Ok();
    BDN_RETURN_IF_ERROR(store_.Put(id, data));
    tally.metadata_bytes_uploaded += data.size();
    tally.bytes_uploaded += data.size();
    if (counters_) counters_->bytes_uploaded += data.size();
    return Status::Ok();
  }

  // Stores the pieces of a version-2 chunk index that neither this seal nor the store holds:
  // one FindMissing for all of them (one request to a remote store), then one PutMany.
  Status PutPieces(const std::vector<std::pair<Digest, std::string>>& pieces, Tally& tally) {
    std::vector<Digest> fresh;
    std::vector<size_t> fresh_at;
    {
      MutexLock lock(mu_);
      for (size_t i = 0; i < pieces.size(); ++i) {
        if (seen_.insert(pieces[i].first).second) {
          fresh.push_back(pieces[i].first);
          fresh_at.push_back(i);
        }
      }
    }
    if (fresh.empty()) return Status::Ok();
    BDN_ASSIGN_OR_RETURN(std::vector<Digest> missing, store_.FindMissing(fresh));
    std::unordered_set<Digest> want(missing.begin(), missing.end());
    std::vector<BlobPut> upload;
    uint64_t bytes = 0;
    for (size_t i : fresh_at) {
      const auto& [id, blob] = pieces[i];
      if (!want.contains(id)) continue;
      upload.push_back({id, AsBytes(blob)});
      bytes += blob.size();
    }
    BDN_RETURN_IF_ERROR(store_.PutMany(upload));
    tally.metadata_bytes_uploaded += bytes;
    tally.bytes_uploaded += bytes;
    if (counters_) counters_->bytes_uploaded += bytes;
    return Status::Ok();
  }

  // Reads, chunks and hashes one file's stream; fills the entry's digest and layout. `item` names
  // the file and gives the size the stream must deliver.
  Result<Tally> SealFile(ByteStream& stream, const SealItem& item, Entry& entry,
                         SealedFile& sealed) {
    const std::string what = "file \"" + item.path + "\"";
    const uint64_t size = item.size_bytes;
    Blake3Hasher file_hash;
    Tally tally;
    std::vector<ChunkRef> refs;
    std::deque<std::future<BlockOut>> inflight;
    Status failed;
    auto drain = [&](size_t keep) {
      while (inflight.size() > keep) {
        BlockOut b = inflight.front().get();
        inflight.pop_front();
        if (!b.status.ok() && failed.ok()) failed = b.status;
        refs.insert(refs.end(), b.refs.begin(), b.refs.end());
        tally.Add(b.tally);
      }
    };
    // Blocks already handed to the chunk pool read their buffers: wait for them on every exit.
    struct Drainer {
      std::function<void()> fn;
      ~Drainer() { fn(); }
    } drainer{[&] { drain(0); }};

    std::vector<uint8_t> carry;
    uint64_t read_total = 0;
    bool eof = false;
    while (!eof && failed.ok()) {
      auto buf = buffers_.Get(chunker_.params().max_bytes + kBlockBytes);
      if (!carry.empty()) std::memcpy(buf->data(), carry.data(), carry.size());
      size_t have = carry.size();
      const size_t want = carry.size() + kBlockBytes;
      while (have < want) {
        BDN_ASSIGN_OR_RETURN(size_t n,
                             stream.Read(std::span<uint8_t>(buf->data() + have, want - have)));
        if (n == 0) {
          eof = true;
          break;
        }
        file_hash.Update(buf->data() + have, n);
        have += n;
        read_total += n;
        if (counters_) counters_->bytes_done += n;
      }
      if (read_total > size) {
        return Err(InternalError(what + ": the source delivered more than the " +
                                 std::to_string(size) + " bytes it listed"));
      }
      buf->size = have;
      auto cuts = std::make_shared<std::vector<size_t>>();
      cuts->push_back(0);
      size_t pos = 0;
      while (pos < have) {
        size_t n = chunker_.NextCut(std::span<const uint8_t>(buf->data() + pos, have - pos), eof);
        if (n == 0) break;
        pos += n;
        cuts->push_back(pos);
      }
      carry.assign(buf->data() + pos, buf->data() + have);
      if (cuts->size() > 1) {
        if (eof && inflight.empty() && refs.empty()) {
          // Small files are handled on this thread: files already run in parallel.
          BlockOut b = StoreChunks(*buf, *cuts);
          if (!b.status.ok()) return Err(b.status);
          refs = std::move(b.refs);
          tally.Add(b.tally);
        } else {
          drain(kMaxBlocksInFlight - 1);
          inflight.push_back(
              chunk_pool_.Submit([this, buf, cuts] { return StoreChunks(*buf, *cuts); }));
        }
      }
    }
    drain(0);
    if (!failed.ok()) return Err(failed);
    BDN_RETURN_IF_ERROR(stream.Finish());
    if (read_total != size) {
      return Err(InternalError(what + ": the source delivered " + std::to_string(read_total) +
                               " bytes, expected " + std::to_string(size)));
    }
    entry.size_bytes = size;
    entry.digest = file_hash.Finalize();
    if (refs.empty()) {
      entry.layout = FileLayout::kEmpty;
    } else if (refs.size() == 1) {
      entry.layout = FileLayout::kSingleChunk;
    } else {
      entry.layout = FileLayout::kIndexed;
      FileIndexBlobs index = EncodeFileIndex(refs);
      BDN_RETURN_IF_ERROR(PutPieces(index.pieces, tally));
      std::span<const uint8_t> bytes = AsBytes(index.root);
      entry.index = Digest::Of(bytes);
      BDN_RETURN_IF_ERROR(PutMetadata(entry.index, bytes, tally));
    }
    sealed = {entry.size_bytes, entry.digest, entry.layout, entry.index, refs.size()};
    if (counters_) ++counters_->files_done;
    return tally;
  }

 private:
  Chunker chunker_;
  BufferPool buffers_;
  ChunkStore& store_;
  TransferCounters* counters_;
  int jobs_;
  // chunk_pool_ tasks submit to upload_pool_, so upload_pool_ is destroyed last.
  ThreadPool upload_pool_;
  ThreadPool chunk_pool_;
  Mutex mu_;
  std::unordered_set<Digest> seen_ GUARDED_BY(mu_);
};

}  // namespace

Result<std::optional<SealedFile>> EntrySource::Reuse(size_t, const SealItem&) {
  return std::optional<SealedFile>();
}

Status EntrySource::OnSealed(size_t, const SealItem&, const SealedFile&) { return Status::Ok(); }

Result<SealResult> SealEntries(std::span<const SealItem> items, EntrySource& source,
                               const SealOptions& options, ChunkStore& store,
                               TransferCounters* counters) {
  BDN_RETURN_IF_ERROR(options.chunker.Validate());
  SealResult result;
  Manifest& m = result.manifest;
  m.chunker = options.chunker;
  m.has_mtimes = options.mtimes == SealOptions::Mtimes::kPreserve;
  m.entries.resize(items.size());
  std::vector<size_t> files;
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const SealItem& it = items[i];
    Entry& e = m.entries[i];
    e.path = it.path;
    e.kind = it.kind;
    e.mode = static_cast<uint16_t>(it.mode & 0777);
    if (m.has_mtimes) e.mtime_ns = it.mtime_ns.value_or(0);
    if (it.kind == EntryKind::kSymlink || it.kind == EntryKind::kHardlink) e.target = it.target;
    if (it.kind == EntryKind::kFile) {
      files.push_back(i);
      total_bytes += it.size_bytes;
    }
  }
  {
    // The manifest's invariants (order, parents, names) are checked before any byte is read: the
    // same entries with every file as if empty must encode.
    Manifest probe = m;
    for (size_t i : files) probe.entries[i].digest = Digest::Of(std::string_view());
    if (auto encoded = EncodeManifest(probe); !encoded) return Err(encoded.error());
  }
  if (counters) {
    counters->bytes_total = total_bytes;
    counters->files_total = files.size();
  }

  Sealer sealer(options, store, counters);
  Tally tally;
  uint64_t chunk_refs = 0;
  {
    ThreadPool file_pool(sealer.jobs(), static_cast<size_t>(sealer.jobs()) * 2);
    std::vector<std::future<Result<Tally>>> futures;
    std::vector<uint64_t> chunk_counts(files.size());
    futures.reserve(files.size());
    // The first failure stops the seal: files not yet started are skipped, so a seal of many
    // files fails as soon as one does instead of trying (and failing) each of them.
    Mutex error_mu;
    Status first_error;
    std::atomic<bool> failed{false};
    auto fail = [&](const Status& s) {
      MutexLock lock(error_mu);
      if (first_error.ok()) first_error = s;
      failed = true;
    };
    for (size_t k = 0; k < files.size() && !failed; ++k) {
      const size_t i = files[k];
      const SealItem& item = items[i];
      auto reused = source.Reuse(i, item);
      if (!reused) {
        fail(reused.error());
        break;
      }
      if (*reused) {
        const SealedFile& f = **reused;
        Entry& e = m.entries[i];
        e.size_bytes = f.size_bytes;
        e.digest = f.digest;
        e.layout = f.layout;
        e.index = f.index;
        chunk_counts[k] = f.chunks;
        tally.chunks_reused += f.chunks;
        if (counters) {
          counters->bytes_done += f.size_bytes;
          ++counters->files_done;
        }
        continue;
      }
      auto stream = source.Open(i, item);
      if (!stream) {
        fail(stream.error());
        break;
      }
      futures.push_back(file_pool.Submit(
          [&, i, k,
           held = std::shared_ptr<ByteStream>(std::move(*stream))]() mutable -> Result<Tally> {
            // Owned here, so that the file is closed when its task ends: the future keeps the
            // task (and what it captured) until every file is sealed, and a tree of thousands
            // of files ran out of descriptors (EMFILE under the default limit of 1024).
            const std::shared_ptr<ByteStream> stream = std::move(held);
            if (failed) return Tally{};
            SealedFile sealed;
            auto r = sealer.SealFile(*stream, items[i], m.entries[i], sealed);
            if (r) {
              chunk_counts[k] = sealed.chunks;
              if (Status s = source.OnSealed(i, items[i], sealed); !s.ok()) r = Err(s);
            }
            if (!r) fail(r.error());
            return r;
          }));
    }
    for (auto& f : futures) {
      Result<Tally> r = f.get();
      if (r) tally.Add(*r);
    }
    if (failed) return Err(first_error);
    for (uint64_t c : chunk_counts) chunk_refs += c;
  }

  BDN_ASSIGN_OR_RETURN(std::string encoded, EncodeManifest(m));
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size());
  result.digest = Digest::Of(bytes);
  BDN_ASSIGN_OR_RETURN(bool had_manifest, store.Contains(result.digest));
  if (!had_manifest) {
    BDN_RETURN_IF_ERROR(store.Put(result.digest, bytes));
    tally.bytes_uploaded += bytes.size();
    tally.metadata_bytes_uploaded += bytes.size();
  }
  result.stats = {files.size(), total_bytes, chunk_refs, m.entries.size()};
  result.chunks_uploaded = tally.chunks_uploaded;
  result.bytes_uploaded = tally.bytes_uploaded;
  result.chunks_reused = tally.chunks_reused;
  result.metadata_bytes_uploaded = tally.metadata_bytes_uploaded;
  return result;
}

namespace {

// A regular file of the walked tree, opened relative to a descriptor of its directory at the
// first Read, and checked against what the walk saw: same file, same size, and no change of
// size, mtime or ctime while it is read.
class DirectoryFileStream : public ByteStream {
 public:
  DirectoryFileStream(std::shared_ptr<const DirFd> dir, std::string name, std::string shown,
                      const struct stat& scanned)
      : dir_(std::move(dir)),
        name_(std::move(name)),
        what_("file \"" + shown + "\""),
        scanned_(scanned) {}

  Result<size_t> Read(std::span<uint8_t> out) override {
    if (!fd_) BDN_RETURN_IF_ERROR(OpenFile());
    for (;;) {
      ssize_t n = ::read(fd_.get(), out.data(), out.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Err(ErrnoError(what_ + ": read", errno));
      }
      read_ += static_cast<uint64_t>(n);
      if (read_ > static_cast<uint64_t>(scanned_.st_size)) return Err(Changed("it grew"));
      return static_cast<size_t>(n);
    }
  }

  Status Finish() override {
    if (!fd_) BDN_RETURN_IF_ERROR(OpenFile());
    struct stat after;
    if (::fstat(fd_.get(), &after) != 0) return ErrnoError(what_, errno);
    if (read_ != static_cast<uint64_t>(before_.st_size) || after.st_size != before_.st_size ||
        after.st_mtim.tv_sec != before_.st_mtim.tv_sec ||
        after.st_mtim.tv_nsec != before_.st_mtim.tv_nsec ||
        after.st_ctim.tv_sec != before_.st_ctim.tv_sec ||
        after.st_ctim.tv_nsec != before_.st_ctim.tv_nsec) {
      return Changed("size or modification time moved during the read");
    }
    return Status::Ok();
  }

 private:
  Status Changed(const std::string& how) const {
    return FailedPreconditionError(what_ + ": changed while being pushed (" + how + ")");
  }

  Status OpenFile() {
    // O_NONBLOCK: a FIFO put in the file's place after the scan must not block the open until
    // a writer comes (it is refused below); a regular file ignores the flag.
    fd_.Reset(::openat(dir_->get(), name_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd_) {
      if (errno == ENOENT || errno == ELOOP) return Changed("it was replaced or removed");
      return ErrnoError(what_, errno);
    }
    if (::fstat(fd_.get(), &before_) != 0) return ErrnoError(what_, errno);
    if (!S_ISREG(before_.st_mode)) return Changed("it is no longer a regular file");
    if (before_.st_ino != scanned_.st_ino || before_.st_dev != scanned_.st_dev ||
        before_.st_size != scanned_.st_size ||
        before_.st_mtim.tv_nsec != scanned_.st_mtim.tv_nsec ||
        before_.st_mtim.tv_sec != scanned_.st_mtim.tv_sec) {
      return Changed("it differs from when the directory was scanned");
    }
    ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    return Status::Ok();
  }

  std::shared_ptr<const DirFd> dir_;
  std::string name_;
  std::string what_;
  struct stat scanned_;
  struct stat before_ {};
  UniqueFd fd_;
  uint64_t read_ = 0;
};

// The files of a walked tree. Open moves the cursor to each file's directory in path order (so
// each directory's subtree is one run: the cursor visits each directory once on the way down and
// once on the way up) and shares a descriptor of it with the stream.
class DirectorySource : public EntrySource {
 public:
  DirectorySource(DirCursor& cursor, const std::vector<ScannedEntry>& scanned)
      : cursor_(cursor), scanned_(scanned) {}

  Result<std::unique_ptr<ByteStream>> Open(size_t index, const SealItem& item) override {
    const std::string& path = item.path;
    const size_t slash = path.rfind('/');
    BDN_ASSIGN_OR_RETURN(auto here, cursor_.Share(slash == std::string::npos
                                                      ? std::string_view()
                                                      : std::string_view(path).substr(0, slash)));
    std::string name = path.substr(slash + 1);  // npos + 1 == 0
    std::string shown = cursor_.Display(name);
    return std::unique_ptr<ByteStream>(std::make_unique<DirectoryFileStream>(
        std::move(here), std::move(name), std::move(shown), scanned_[index].st));
  }

 private:
  DirCursor& cursor_;
  const std::vector<ScannedEntry>& scanned_;
};

}  // namespace

Result<std::vector<ScannedEntry>> ScanDirectory(const fs::path& dir) {
  BDN_ASSIGN_OR_RETURN(DirCursor cursor, DirCursor::Open(dir));
  std::vector<ScannedEntry> scanned;
  BDN_RETURN_IF_ERROR(Walk(cursor, scanned, {}, /*list_others=*/true));
  return scanned;
}

Result<SealResult> SealDirectory(const fs::path& dir, const SealOptions& options, ChunkStore& store,
                                 TransferCounters* counters) {
  BDN_RETURN_IF_ERROR(options.chunker.Validate());
  struct stat root_st;
  if (::stat(dir.c_str(), &root_st) != 0)
    return Err(ErrnoError("directory \"" + dir.string() + "\"", errno));
  if (!S_ISDIR(root_st.st_mode)) {
    return Err(InvalidArgumentError("directory \"" + dir.string() + "\": not a directory"));
  }
  BDN_ASSIGN_OR_RETURN(DirCursor cursor, DirCursor::Open(dir));
  BDN_RETURN_IF_ERROR(CheckNotRefused(cursor.fd(), dir, options.refused_dirs));
  std::vector<ScannedEntry> scanned;
  BDN_RETURN_IF_ERROR(Walk(cursor, scanned, options.refused_dirs));

  std::vector<SealItem> items(scanned.size());
  std::map<std::pair<dev_t, ino_t>, std::string> first_link;
  for (size_t i = 0; i < scanned.size(); ++i) {
    const ScannedEntry& it = scanned[i];
    SealItem& e = items[i];
    e.path = it.path;
    e.mode = static_cast<uint16_t>(it.st.st_mode & 0777);
    e.mtime_ns = static_cast<int64_t>(it.st.st_mtim.tv_sec) * 1000000000 + it.st.st_mtim.tv_nsec;
    switch (it.st.st_mode & S_IFMT) {
      case S_IFDIR:
        e.kind = EntryKind::kDirectory;
        break;
      case S_IFLNK:
        e.kind = EntryKind::kSymlink;
        e.target = it.target;
        break;
      default: {
        e.kind = EntryKind::kFile;
        if (it.st.st_nlink > 1) {
          auto [pos, inserted] = first_link.try_emplace({it.st.st_dev, it.st.st_ino}, it.path);
          if (!inserted) {
            e.kind = EntryKind::kHardlink;
            e.target = pos->second;
            break;
          }
        }
        e.size_bytes = static_cast<uint64_t>(it.st.st_size);
      }
    }
  }
  DirectorySource source(cursor, scanned);
  return SealEntries(items, source, options, store, counters);
}

std::vector<Entry> SymlinksLeavingTheTree(const Manifest& m) {
  std::vector<Entry> out;
  for (const Entry& e : m.entries) {
    if (e.kind != EntryKind::kSymlink) continue;
    bool leaves = e.target.starts_with('/');
    // Levels below the root of the link's directory, then of each step of the target.
    int64_t depth = static_cast<int64_t>(std::count(e.path.begin(), e.path.end(), '/'));
    for (size_t at = 0; !leaves && at <= e.target.size();) {
      size_t end = e.target.find('/', at);
      if (end == std::string::npos) end = e.target.size();
      const std::string_view step(e.target.data() + at, end - at);
      if (step == "..") {
        leaves = --depth < 0;
      } else if (!step.empty() && step != ".") {
        ++depth;
      }
      at = end + 1;
    }
    if (leaves) out.push_back(e);
  }
  return out;
}

Result<PushResult> Push(const PushOptions& options, ChunkStore& store, Registry& registry,
                        TransferCounters* counters) {
  BDN_ASSIGN_OR_RETURN(auto claim, registry.ClaimPush(options.ns, options.volume, options.tags));
  BDN_ASSIGN_OR_RETURN(SealResult seal, SealDirectory(options.dir, options.seal, store, counters));
  // The steps after the transfer, for the progress line (TransferCounters::step).
  auto step = [counters](const char* what) {
    if (counters) counters->step = what;
  };
  step("syncing");
  BDN_RETURN_IF_ERROR(store.Sync());
  step("committing");
  CommitRequest req;
  req.ns = options.ns;
  req.volume = options.volume;
  req.digest = seal.digest;
  req.stats = seal.stats;
  req.source_uri = options.source_uri;
  req.tags = options.tags;
  req.expected_sequence = options.expected_sequence;
  Result<CommitResult> committed = registry.Commit(req);
  uint64_t uploaded_again = 0;
  // Replicas behind one address: a replica that accepted some of the chunks may have died
  // before they were durable, so the commit is refused as "not stored". Sealing again stores
  // exactly what the store now reports missing (the rest is found and skipped), then commits.
  for (int round = 0;
       !committed && IsNotStoredError(committed.error()) && round < options.max_commit_rounds;
       ++round) {
    log::Warn("push: " + committed.error().message() + "; storing what is missing again");
    if (counters) {  // the progress of the new pass over the directory, not a sum of passes
      counters->bytes_done = 0;
      counters->files_done = 0;
    }
    step(nullptr);
    BDN_ASSIGN_OR_RETURN(SealResult again,
                         SealDirectory(options.dir, options.seal, store, counters));
    step("syncing");
    BDN_RETURN_IF_ERROR(store.Sync());
    step("committing");
    seal.digest = again.digest;
    seal.stats = again.stats;
    seal.chunks_uploaded += again.chunks_uploaded;
    uploaded_again += again.chunks_uploaded;
    seal.bytes_uploaded += again.bytes_uploaded;
    seal.metadata_bytes_uploaded += again.metadata_bytes_uploaded;
    req.digest = again.digest;
    req.stats = again.stats;
    committed = registry.Commit(req);
  }
  step(nullptr);
  if (!committed) return Err(committed.error());
  const CommitResult& commit = *committed;
  PushResult out;
  out.ref = {options.ns, options.volume, seal.digest};
  out.sequence = commit.sequence;
  out.head_updated = commit.head_updated;
  out.tags_applied = commit.tags_applied;
  out.stats = seal.stats;
  out.chunks_uploaded = seal.chunks_uploaded;
  out.bytes_uploaded = seal.bytes_uploaded;
  out.chunks_reused = seal.chunks_reused;
  out.metadata_bytes_uploaded = seal.metadata_bytes_uploaded;
  out.chunks_uploaded_again = uploaded_again;
  out.unchanged = commit.unchanged;
  out.symlinks_outside = SymlinksLeavingTheTree(seal.manifest);
  return out;
}

}  // namespace bdn
