// Fuzzes the readers of a pack file (store/pack_file.h): the input is a whole pack, as a damaged
// disk, a torn write or another writer of an object-store bucket could leave it.
//  - ReadFooter either fails with Corruption "pack f: …" or lists records in ascending order
//    inside [kPackHeaderBytes, file size); each is then read with ReadBlob, which gives bytes
//    that hash to the entry's id and number raw_bytes, or fails with Corruption "chunk b3:…".
//  - ScanRecords fails only with Corruption "pack f: not a pack" or "pack f: pack format version
//    N is not supported", or returns records that end at
//    or before valid_bytes <= the file size, each of which ReadBlob reads back.
//  - SalvageRecords never fails on a readable file; every record it returns reads back.
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "bdn/base/fd.h"
#include "bdn/store/pack_file.h"
#include "fuzz_check.h"

namespace {

using namespace bdn;

// Reads `loc` and checks what ReadBlob promises. `must_read`: the record was verified already.
void CheckRead(int fd, const pack::BlobLocation& loc, bool must_read) {
  // A declared length far beyond the input is refused by the reader without allocating it;
  // stay clear of the fuzzer's memory limit for the ones it would allocate.
  if (loc.raw_bytes > (16u << 20)) return;
  auto got = pack::ReadBlob(fd, loc, "pack f");
  if (got) {
    FUZZ_CHECK(got->size() == loc.raw_bytes, std::to_string(got->size()));
    FUZZ_CHECK(Digest::Of(std::span<const uint8_t>(*got)) == loc.id, loc.id.ToString());
    return;
  }
  FUZZ_CHECK(!must_read, got.error().ToString());
  FUZZ_CHECK(fuzz::IsError(got.error(), StatusCode::kCorruption, "chunk b3:"),
             got.error().ToString());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  UniqueFd fd(::memfd_create("pack", MFD_CLOEXEC));
  if (!fd) return 0;
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd.get(), data + done, size - done);
    if (n <= 0) return 0;
    done += static_cast<size_t>(n);
  }

  auto footer = pack::ReadFooter(fd.get(), size, "pack f");
  if (!footer) {
    FUZZ_CHECK(fuzz::IsError(footer.error(), StatusCode::kCorruption, "pack f: "),
               footer.error().ToString());
  } else {
    uint64_t last_end = pack::kPackHeaderBytes;
    for (const pack::BlobLocation& loc : *footer) {
      FUZZ_CHECK(loc.offset >= last_end && loc.end() <= size,
                 "entry at " + std::to_string(loc.offset));
      last_end = loc.end();
      CheckRead(fd.get(), loc, false);
    }
  }

  auto scan = pack::ScanRecords(fd.get(), size, "pack f");
  if (!scan) {
    FUZZ_CHECK(fuzz::IsError(scan.error(), StatusCode::kCorruption, "pack f: not a pack") ||
                   fuzz::IsError(scan.error(), StatusCode::kCorruption, "pack f: pack format"),
               scan.error().ToString());
  } else {
    FUZZ_CHECK(scan->valid_bytes <= size, std::to_string(scan->valid_bytes));
    for (const pack::BlobLocation& loc : scan->blobs) {
      FUZZ_CHECK(loc.end() <= scan->valid_bytes, "record at " + std::to_string(loc.offset));
      CheckRead(fd.get(), loc, true);
    }
  }

  auto salvage = pack::SalvageRecords(fd.get(), size, "pack f");
  FUZZ_CHECK(salvage.has_value(), salvage.error().ToString());
  for (const pack::BlobLocation& loc : salvage->blobs) {
    FUZZ_CHECK(loc.end() <= size, "record at " + std::to_string(loc.offset));
    CheckRead(fd.get(), loc, true);
  }
  return 0;
}
