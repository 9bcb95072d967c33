#include "bdn/sync/file_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "bdn/base/dir_fd.h"
#include "bdn/base/fd.h"
#include "bdn/base/text.h"  // EscapeName, IsValidUtf8
#include "bdn/sync/retry.h"

namespace bdn::sync {
namespace {

// size-mtime-inode-mode-ctime: the mode because the version records it (a chmod alone is a
// change to mirror), the ctime because every change of the inode moves it, even a write whose
// mtime was set back (touch -d).
std::string EtagOf(const struct stat& st) {
  auto ns = [](const struct timespec& t) {
    return std::to_string(static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec);
  };
  char mode[8];
  std::snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(st.st_mode & 07777));
  return std::to_string(st.st_size) + "-" + ns(st.st_mtim) + "-" + std::to_string(st.st_ino) + "-" +
         mode + "-" + ns(st.st_ctim);
}

// A file of the source read from an offset; checked against its listed etag when opened and
// again at its end.
class FileStream : public ByteStream {
 public:
  FileStream(std::string root, SourceObject object, uint64_t offset, bool single_file,
             std::string source, const SourceOptions& options)
      : root_(std::move(root)),
        object_(std::move(object)),
        offset_(offset),
        single_file_(single_file),
        source_(std::move(source)),
        cancel_(options.cancel),
        fetched_(options.bytes_fetched) {}

  Result<size_t> Read(std::span<uint8_t> out) override {
    if (cancel_ && cancel_->load()) return Err(CanceledError(source_));
    if (!fd_) BDN_RETURN_IF_ERROR(OpenFile());
    for (;;) {
      ssize_t n = ::pread(fd_.get(), out.data(), out.size(), static_cast<off_t>(offset_));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Err(ErrnoError(What() + ": read", errno));
      }
      offset_ += static_cast<uint64_t>(n);
      if (fetched_) *fetched_ += static_cast<uint64_t>(n);
      if (offset_ > object_.size_bytes) return Err(Changed("it grew"));
      if (n == 0 && offset_ != object_.size_bytes) return Err(Changed("it shrank"));
      return static_cast<size_t>(n);
    }
  }

  Status Finish() override {
    if (!fd_) BDN_RETURN_IF_ERROR(OpenFile());
    struct stat st;
    if (::fstat(fd_.get(), &st) != 0) return ErrnoError(What(), errno);
    if (EtagOf(st) != object_.etag) return Changed("it was written while being read");
    return Status::Ok();
  }

 private:
  std::string What() const { return source_ + ": file \"" + EscapeName(object_.path) + "\""; }
  Status Changed(const std::string& how) const {
    return WithCode(FailedPreconditionError(What() + ": changed during the sync (" + how + ")"),
                    kSourceChanged);
  }

  Status OpenFile() {
    // O_NONBLOCK: a FIFO put where the listed file was would block the open until a writer
    // came (no signal ends it); it is refused below as any file that is not regular. It does
    // nothing to the reads of a regular file.
    if (single_file_) {
      fd_.Reset(::open(root_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    } else {
      // Step down from the root one component at a time, never through a symlink.
      BDN_ASSIGN_OR_RETURN(DirFd dir, DirFd::Open(root_));
      std::string_view rest = object_.path;
      std::string shown = root_;
      size_t slash;
      while ((slash = rest.find('/')) != std::string_view::npos) {
        std::string name(rest.substr(0, slash));
        shown += "/" + name;
        auto next = DirFd::OpenAt(dir.get(), name, shown);
        if (!next) {
          if (next.error().code() == StatusCode::kNotFound) return Changed("it was removed");
          return next.error();
        }
        dir = std::move(*next);
        rest.remove_prefix(slash + 1);
      }
      fd_.Reset(::openat(dir.get(), std::string(rest).c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    }
    if (!fd_) {
      if (errno == ENOENT || errno == ELOOP || errno == ENXIO) {
        return Changed("it was replaced or removed");
      }
      return ErrnoError(What(), errno);
    }
    struct stat st;
    if (::fstat(fd_.get(), &st) != 0) return ErrnoError(What(), errno);
    if (!S_ISREG(st.st_mode)) {
      fd_.Reset();
      return Changed("it was replaced by something that is not a regular file");
    }
    if (EtagOf(st) != object_.etag) return Changed("it differs from the listing");
    ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    return Status::Ok();
  }

  std::string root_;
  SourceObject object_;
  uint64_t offset_;
  bool single_file_;
  std::string source_;
  const std::atomic<bool>* cancel_;
  std::atomic<uint64_t>* fetched_;
  UniqueFd fd_;
};

class FileSource : public Source {
 public:
  FileSource(std::string uri, std::string path, SourceOptions options)
      : uri_(std::move(uri)), path_(std::move(path)), options_(std::move(options)) {}

  const std::string& uri() const override { return uri_; }
  std::string Identity() const override { return "file://" + path_; }

  Result<SourceListing> List() override {
    SourceListing out;
    // On a server: the canonical path, checked against its file roots and data directory.
    BDN_ASSIGN_OR_RETURN(read_path_, CheckFileAccess(uri_, path_, options_.access));
    struct stat st;
    if (::stat(read_path_.c_str(), &st) != 0) {
      Status s = ErrnoError(uri_, errno);
      return Err(s.code() == StatusCode::kNotFound           ? WithCode(s, kSourceNotFound)
                 : s.code() == StatusCode::kPermissionDenied ? WithCode(s, kAccessDenied)
                                                             : s);
    }
    if (S_ISREG(st.st_mode)) {
      single_file_ = true;
      std::string name = path_.substr(path_.rfind('/') + 1);
      out.objects.push_back({name, static_cast<uint64_t>(st.st_size), EtagOf(st),
                             static_cast<uint16_t>(st.st_mode & 0777)});
      return out;
    }
    if (!S_ISDIR(st.st_mode)) {
      return Err(WithCode(InvalidArgumentError(uri_ + ": neither a directory nor a regular file"),
                          kSourceNotFound));
    }
    auto scanned = ScanDirectory(read_path_);
    if (!scanned) return Err(scanned.error().WithPrefix(uri_));
    uint64_t left_out = 0;  // symlinks and special files
    const ScannedEntry* first_left_out = nullptr;
    for (const ScannedEntry& e : *scanned) {
      if (S_ISDIR(e.st.st_mode)) continue;
      if (!S_ISREG(e.st.st_mode)) {
        if (left_out++ == 0) first_left_out = &e;
        out.left_out.push_back(e.path);
        continue;
      }
      // A name that is not UTF-8 (the file's or a directory's above it), which no version can
      // hold; only regular files are kept, so only their paths must be.
      if (!IsValidUtf8(e.path)) {
        return Err(WithCode(InvalidArgumentError(uri_ + ": path \"" + read_path_ + "/" + e.path +
                                                 "\": name is not valid UTF-8"),
                            kInvalidObject));
      }
      out.objects.push_back({e.path, static_cast<uint64_t>(e.st.st_size), EtagOf(e.st),
                             static_cast<uint16_t>(e.st.st_mode & 0777)});
    }
    // Nothing to seal is not a version, as an object store's empty prefix (NothingUnder): an
    // empty tree, or one of links only (a Hugging Face cache snapshot links every file into
    // ../../blobs).
    if (out.objects.empty() && first_left_out == nullptr) {
      return Err(WithCode(NotFoundError(uri_ + ": nothing to sync: no regular file in the tree"),
                          kSourceNotFound));
    }
    if (out.objects.empty()) {
      return Err(WithCode(
          NotFoundError(
              uri_ + ": nothing to sync: no regular file, and " + std::to_string(left_out) +
              (left_out == 1 ? " symlink or special file" : " symlinks or special files") +
              " left out (\"" + EscapeName(first_left_out->path) +
              "\"); file:// syncs regular files only: sync a copy with the links "
              "resolved (cp -rL)"),
          kSourceNotFound));
    }
    BDN_RETURN_IF_ERROR(ListingBudget(uri_, options_).Objects(out.objects.size()));
    return out;
  }

  Result<std::unique_ptr<ByteStream>> Open(const SourceObject& object, uint64_t offset) override {
    return std::unique_ptr<ByteStream>(
        std::make_unique<FileStream>(read_path_, object, offset, single_file_, uri_, options_));
  }

 private:
  std::string uri_;
  std::string path_;       // as the URI gives it
  std::string read_path_;  // what List read: path_, or its canonical form on a server
  SourceOptions options_;
  bool single_file_ = false;
};

}  // namespace

Result<std::unique_ptr<Source>> OpenFileSource(const std::string& uri, const FileUri& parsed,
                                               const SourceOptions& options) {
  return std::unique_ptr<Source>(std::make_unique<FileSource>(uri, parsed.path, options));
}

}  // namespace bdn::sync
