// Reading and writing one pack file through a file descriptor (docs/format.md, "Packs"):
// appending records and sealing, reading the footer, scanning the records of a pack whose footer
// is missing or torn, and reading one blob, verified. No locking and no naming: the store above
// decides which file, when to sync and who may write.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/digest/digest.h"
#include "bdn/store/pack_format.h"

namespace bdn::pack {

// Appends blob records to a new pack file, then seals it with its footer. Not thread-safe: one
// thread at a time per writer (the store hands each open pack to one writer thread at a time).
class PackWriter {
 public:
  // Writes the pack header at offset 0 of `fd`, an empty file open for reading and writing.
  // `what` names the file in messages ("pack /…/packs/0123….open").
  // Errors: ErrnoError "`what`: write: …" (ENOSPC → FailedPrecondition).
  static Result<PackWriter> Start(int fd, std::string what);

  // Appends one record: `stored` is the encoded blob (the raw bytes for Codec::kNone), `raw_bytes`
  // its decoded length, `id` the BLAKE3 of the decoded bytes (not checked here). One pwritev.
  // Returns where the record went. On an error nothing is recorded, the file is cut back to the
  // end of the last whole record, and later appends may still succeed.
  // Errors: ErrnoError "`what`: write: …"; InvalidArgument if a length exceeds kMaxBlobBytes.
  Result<BlobLocation> Append(const Digest& id, uint64_t raw_bytes, Codec codec,
                              std::span<const uint8_t> stored);

  // One record written as its bytes arrive (an upload), stored raw (Codec::kNone): the payload
  // goes after a reserved header slot, and FinishRecord writes the header last, so until then the
  // slot is zeros and a scan of the pack stops there (a torn tail). One streamed record at a
  // time, and no Append or Seal while it is open.
  // Errors (each): ErrnoError "`what`: write: …" (the record is then abandoned).
  Status BeginRecord();
  Status AppendPayload(std::span<const uint8_t> piece);
  // Completes the streamed record as blob `id` (the BLAKE3 of its payload: the caller checked).
  Result<BlobLocation> FinishRecord(const Digest& id);
  // Cuts the file back to the end of the last whole record.
  void AbandonRecord();
  bool streaming() const { return streaming_; }

  // Writes the footer and trailer after the last record (EncodeFooter). Syncs nothing. After
  // Seal, Append fails. Errors: ErrnoError "`what`: write: …".
  Status Seal();

  // Length of the file so far (header and whole records; with the footer once sealed).
  uint64_t bytes() const { return end_; }
  // Every record appended, in file order.
  const std::vector<BlobLocation>& blobs() const { return blobs_; }
  bool sealed() const { return sealed_; }
  const std::string& what() const { return what_; }

 private:
  PackWriter(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}
  int fd_;
  std::string what_;
  uint64_t end_ = kPackHeaderBytes;
  std::vector<BlobLocation> blobs_;
  bool sealed_ = false;
  bool streaming_ = false;
  uint64_t stream_bytes_ = 0;  // payload of the streamed record so far
};

// Reads the trailer and footer of a sealed pack of `file_bytes` bytes. Errors: Corruption
// "`what`: no valid trailer (…)" / "`what`: footer: …" for a pack whose writer never sealed it or
// whose tail is torn or damaged (ScanRecords can still recover its whole records); ErrnoError on
// I/O errors.
Result<std::vector<BlobLocation>> ReadFooter(int fd, uint64_t file_bytes, std::string_view what);

// The whole records at the start of a pack, found by ScanRecords.
struct ScanResult {
  std::vector<BlobLocation> blobs;  // in file order; each verified
  uint64_t valid_bytes = 0;         // where the last whole record ends (kPackHeaderBytes if none)
  std::string stop_reason;          // why the scan stopped before file_bytes; empty if it did not
};

// Reads records from just after the pack header until the end of the file or the first record
// that is cut off, has a damaged header, does not decode, or whose decoded bytes do not hash to
// its id: the torn tail of a pack whose writer died, or the footer of a sealed one (which does
// not parse as a record). Reads every byte it accepts. Errors: Corruption "`what`: not a pack
// (bad header)" when the pack header itself is damaged; ErrnoError on I/O errors.
//
// `from` > kPackHeaderBytes continues an earlier scan of a pack still being written (by another
// process): the scan starts at the record there (the earlier scan's valid_bytes; the pack header
// is not read again), and the result lists only the records from there on. Safe while the writer
// appends: a record counts only once it lies whole within `file_bytes` and its bytes hash to its
// id, so one half written is left for a later scan.
Result<ScanResult> ScanRecords(int fd, uint64_t file_bytes, std::string_view what,
                               uint64_t from = kPackHeaderBytes);

// The whole records of a sealed pack whose footer is damaged, found by SalvageRecords.
struct SalvageResult {
  std::vector<BlobLocation> blobs;  // every whole record, in file order; each verified
  // Records whose header checks but whose payload does not decode or hash to its id: skipped by
  // the length their header gives.
  uint64_t damaged_records = 0;
  // Places where no record header was found: the scan searched forward from there for the next
  // valid one ("BDNR" and a matching check), skipping `resynced_bytes` bytes in all (this counts
  // the damaged footer and trailer, which are not records).
  uint64_t resyncs = 0;
  uint64_t resynced_bytes = 0;
  bool pack_header_damaged = false;  // the 16-byte pack header did not check; records still read
};

// Finds every whole record of a sealed pack whose footer or trailer is damaged, without giving up
// at the first bad one (a committed pack's good records must all stay readable): a record whose
// header checks but whose payload is bad is skipped by its header's length; where no record
// header checks (a damaged header, the old footer), the scan searches forward for the next one.
// A record header's 8-byte check makes a false match in random bytes a 2^-64 chance, and every
// accepted record is verified against its id. Scans the whole file (it trusts no trailer).
// Errors: ErrnoError on I/O errors only.
Result<SalvageResult> SalvageRecords(int fd, uint64_t file_bytes, std::string_view what);

// Reads the blob at `loc` (one preadv of its record header and payload; an uncompressed payload is
// read straight into the returned buffer), checks the record header matches `loc`, decodes, and
// checks the bytes hash to loc.id. `pack_what` names the pack ("pack /…/0123….pack").
// Errors: Corruption naming the chunk, the pack and the offset: "chunk b3:…: digest mismatch
// (stored bytes hash to b3:…) in pack … at offset N", "chunk b3:…: damaged record header in pack
// … at offset N (…)", "chunk b3:…: stored bytes do not decompress (…) in pack … at offset N",
// "chunk b3:…: pack … ends inside the record at offset N"; ErrnoError "chunk b3:…: read pack …"
// on I/O errors. Thread-safe (pread only).
Result<std::vector<uint8_t>> ReadBlob(int fd, const BlobLocation& loc, std::string_view pack_what);

// ReadBlob, but only from the page cache: one preadv2 with RWF_NOWAIT (Linux 4.14), which fails
// rather than wait for the disk. Returns the checked bytes, or nullopt when any part of the
// record is not in the page cache, on an I/O error, and when the record does not check
// (ReadBlob then reports it). Thread-safe (pread only).
std::optional<std::vector<uint8_t>> ReadBlobNow(int fd, const BlobLocation& loc);

// The checks of ReadBlob on a record already in memory (read from an object store): its 64-byte
// record `header` describes `loc`, the `payload` (loc.stored_bytes) decodes into `raw`
// (loc.raw_bytes; for Codec::kNone the caller has put the payload there), and `raw` hashes to
// loc.id. Errors: Corruption as ReadBlob's, naming the chunk, `pack_what` and the offset.
// Thread-safe.
Status CheckRecord(std::span<const uint8_t> header, std::span<const uint8_t> payload,
                   std::span<uint8_t> raw, const BlobLocation& loc, std::string_view pack_what);

}  // namespace bdn::pack
