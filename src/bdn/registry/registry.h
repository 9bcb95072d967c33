// Registry: namespaces, volumes, versions, tags, head and the per-volume sequence.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"

namespace bdn {

enum class Lifecycle { kAlive, kDeleted };
std::string_view LifecycleName(Lifecycle l);  // "ALIVE" / "DELETED"

// Totals of a version's tree, stored with it.
struct VersionStats {
  uint64_t files = 0;       // regular files (hardlinks not counted)
  uint64_t bytes = 0;       // sum of regular file sizes
  uint64_t chunks = 0;      // chunk references over all files
  uint64_t entries = 0;     // all manifest entries
};

struct VersionRecord {
  std::string ns;
  std::string volume;
  Digest digest;
  int64_t sequence = 0;  // the volume sequence at which the version was committed
  Lifecycle lifecycle = Lifecycle::kAlive;
  int64_t created_unix_ms = 0;
  std::optional<int64_t> deleted_unix_ms;
  std::optional<int64_t> delete_after_unix_ms;
  VersionStats stats;
  std::string source_uri;
  std::vector<std::string> tags;  // sorted; "head" is not listed here
  bool is_head = false;
};

struct VolumeRecord {
  std::string ns;
  std::string name;
  std::optional<Digest> head;
  int64_t sequence = 0;
  std::map<std::string, Digest> tags;  // excluding head
  uint64_t live_versions = 0;
  uint64_t deleted_versions = 0;
  int64_t created_unix_ms = 0;
};

struct CommitRequest {
  std::string ns;
  std::string volume;
  Digest digest;
  VersionStats stats;
  std::string source_uri;
  std::vector<std::string> tags;  // applied atomically with the commit
  std::optional<int64_t> expected_sequence;
};

struct CommitResult {
  int64_t sequence = 0;  // the volume's sequence after the commit
  bool unchanged = false;  // the version already existed (alive); no new version was created
  bool head_updated = false;
  std::vector<std::string> tags_applied;
};

// Held while a push to one volume is in flight; released on destruction or when the holder dies.
class PushClaim {
 public:
  virtual ~PushClaim() = default;
};

// The metadata store. Implementations are thread-safe and make each mutation atomic.
class Registry {
 public:
  virtual ~Registry() = default;

  virtual Result<std::vector<std::string>> ListNamespaces() = 0;
  // Errors: NotFound "namespace \"ns\": not found".
  virtual Result<std::vector<VolumeRecord>> ListVolumes(const std::string& ns) = 0;
  // Errors: NotFound "volume bdn:ns/vol: not found".
  virtual Result<VolumeRecord> GetVolume(const std::string& ns, const std::string& volume) = 0;
  // Newest first (by sequence). Errors: NotFound for an unknown volume.
  virtual Result<std::vector<VersionRecord>> ListVersions(const std::string& ns,
                                                          const std::string& volume,
                                                          bool include_deleted) = 0;
  // Errors: NotFound "version bdn:ns/vol@b3:…: not found".
  virtual Result<VersionRecord> GetVersion(const std::string& ns, const std::string& volume,
                                           const Digest& digest) = 0;
  // Digests of the volume's versions (alive and deleted) whose hex starts with `hex_prefix`.
  virtual Result<std::vector<Digest>> FindVersions(const std::string& ns, const std::string& volume,
                                                   const std::string& hex_prefix) = 0;

  // Records a sealed version (creating the namespace and volume if missing), moves head to it and
  // applies the tags, all in one transaction. Re-committing an existing alive version creates no
  // new version (unchanged = true) but still moves head and tags. The sequence is bumped only if
  // something changed. Errors: Conflict on a stale expected_sequence; FailedPrecondition if the
  // version exists but is DELETED ("restore it first"); InvalidArgument if `tags` holds "head".
  virtual Result<CommitResult> Commit(const CommitRequest& req) = 0;

  // Points `tag` at an alive version. Returns the new sequence.
  // Errors: NotFound (volume/version), InvalidArgument for "head", Conflict on a stale
  // expected_sequence, FailedPrecondition for a deleted version.
  virtual Result<int64_t> SetTag(const std::string& ns, const std::string& volume,
                                 const std::string& tag, const Digest& digest,
                                 std::optional<int64_t> expected_sequence) = 0;
  // Removes a tag. Errors: NotFound "tag \"t\" of bdn:ns/vol: not found", InvalidArgument for
  // "head", Conflict on a stale expected_sequence.
  virtual Result<int64_t> DeleteTag(const std::string& ns, const std::string& volume,
                                    const std::string& tag,
                                    std::optional<int64_t> expected_sequence) = 0;

  // Claims the right to push to a volume (which need not exist yet). A claim whose holder dies is
  // released. Errors: Conflict "volume bdn:ns/vol: push in progress (...)".
  virtual Result<std::unique_ptr<PushClaim>> ClaimPush(const std::string& ns,
                                                       const std::string& volume) = 0;
};

// SQLite registry in one database file (WAL mode, busy timeout), safe for several processes.
class SqliteRegistry : public Registry {
 public:
  // Opens or creates the database. Errors: Internal naming the file.
  static Result<std::unique_ptr<SqliteRegistry>> Open(const std::filesystem::path& db_path);
  ~SqliteRegistry() override;

  Result<std::vector<std::string>> ListNamespaces() override;
  Result<std::vector<VolumeRecord>> ListVolumes(const std::string& ns) override;
  Result<VolumeRecord> GetVolume(const std::string& ns, const std::string& volume) override;
  Result<std::vector<VersionRecord>> ListVersions(const std::string& ns, const std::string& volume,
                                                  bool include_deleted) override;
  Result<VersionRecord> GetVersion(const std::string& ns, const std::string& volume,
                                   const Digest& digest) override;
  Result<std::vector<Digest>> FindVersions(const std::string& ns, const std::string& volume,
                                           const std::string& hex_prefix) override;
  Result<CommitResult> Commit(const CommitRequest& req) override;
  Result<int64_t> SetTag(const std::string& ns, const std::string& volume, const std::string& tag,
                         const Digest& digest, std::optional<int64_t> expected_sequence) override;
  Result<int64_t> DeleteTag(const std::string& ns, const std::string& volume,
                            const std::string& tag,
                            std::optional<int64_t> expected_sequence) override;
  // An flock(2) on <db dir>/locks/<ns>~<volume>.lock: the kernel drops it when the holder dies.
  Result<std::unique_ptr<PushClaim>> ClaimPush(const std::string& ns,
                                               const std::string& volume) override;

 private:
  struct Impl;
  explicit SqliteRegistry(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bdn
