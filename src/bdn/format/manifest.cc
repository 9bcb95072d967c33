#include "bdn/format/manifest.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>

#include "bdn/base/text.h"
#include "bdn/format/byte_codec.h"

namespace bdn {
namespace {

using format_internal::Reader;
using format_internal::Writer;

constexpr char kManifestMagic[4] = {'B', 'D', 'N', 'M'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint8_t kAlgorithmFastCdc2020 = 1;
constexpr uint8_t kFlagMtimes = 1;

std::string_view Parent(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

// Checks the Manifest invariants shared by encode and decode; `fail` builds the error.
template <typename Fail>
Status CheckEntries(const Manifest& m, Fail fail) {
  std::unordered_map<std::string_view, EntryKind> kinds;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const Entry& e = m.entries[i];
    if (Status s = ValidateEntryPath(e.path); !s.ok()) return fail(s.message());
    if (i > 0 && !(m.entries[i - 1].path < e.path)) {
      return fail("path \"" + e.path + "\": entries not sorted or duplicated");
    }
    if (e.mode & ~0777) return fail("path \"" + e.path + "\": mode has bits outside 0777");
    if (e.mtime_ns.has_value() != m.has_mtimes) {
      return fail("path \"" + e.path + "\": mtime presence differs from the manifest flag");
    }
    std::string_view parent = Parent(e.path);
    if (!parent.empty()) {
      auto it = kinds.find(parent);
      if (it == kinds.end() || it->second != EntryKind::kDirectory) {
        return fail("path \"" + e.path + "\": parent directory is not an entry");
      }
    }
    if (e.kind == EntryKind::kFile) {
      bool ok = (e.layout == FileLayout::kEmpty && e.size_bytes == 0 &&
                 e.digest == Digest::Of(std::string_view())) ||
                (e.layout == FileLayout::kSingleChunk && e.size_bytes > 0) ||
                (e.layout == FileLayout::kIndexed && e.size_bytes > 0);
      if (!ok) return fail("path \"" + e.path + "\": file layout does not match its size");
      if (e.size_bytes > kMaxFileBytes) {
        return fail("path \"" + e.path + "\": file size " + std::to_string(e.size_bytes) +
                    " is over 2^63-1 bytes");
      }
      // A chunk is never longer than the chunker maximum, so neither is a single-chunk file.
      if (e.layout == FileLayout::kSingleChunk && e.size_bytes > m.chunker.max_bytes) {
        return fail("path \"" + e.path + "\": single-chunk file of " +
                    std::to_string(e.size_bytes) + " bytes is longer than the chunker maximum " +
                    std::to_string(m.chunker.max_bytes));
      }
    } else if (e.size_bytes != 0 || e.layout != FileLayout::kEmpty) {
      return fail("path \"" + e.path + "\": only files have a size");
    }
    if (e.kind == EntryKind::kSymlink) {
      if (e.target.empty()) return fail("path \"" + e.path + "\": symlink target is empty");
      if (e.target.find('\0') != std::string::npos) {
        return fail("path \"" + e.path + "\": symlink target contains a NUL byte");
      }
      if (!IsValidUtf8(e.target)) {
        return fail("path \"" + e.path + "\": symlink target \"" +
                    EscapeName(e.target, Backslashes::kKeep) + "\" is not valid UTF-8");
      }
    }
    kinds.emplace(e.path, e.kind);
  }
  for (const Entry& e : m.entries) {
    if (e.kind != EntryKind::kHardlink) continue;
    auto it = kinds.find(e.target);
    if (it == kinds.end() || it->second != EntryKind::kFile) {
      return fail("path \"" + e.path + "\": hardlink target \"" + e.target +
                  "\" is not a file entry");
    }
  }
  return Status::Ok();
}

}  // namespace

std::string_view EntryKindName(EntryKind kind) {
  switch (kind) {
    case EntryKind::kDirectory:
      return "directory";
    case EntryKind::kFile:
      return "file";
    case EntryKind::kSymlink:
      return "symlink";
    case EntryKind::kHardlink:
      return "hardlink";
  }
  return "unknown";
}

Status ValidateEntryPath(std::string_view path) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("path \"" + EscapeName(path, Backslashes::kKeep) + "\": " + why);
  };
  if (path.empty()) return bad("empty");
  if (path.find('\0') != std::string_view::npos) return bad("contains a NUL byte");
  if (!IsValidUtf8(path)) return bad("not valid UTF-8");
  if (path.front() == '/') return bad("must be relative");
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    std::string_view seg = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty()) return bad("empty segment");
    if (seg == ".") return bad("\".\" segment not allowed");
    if (seg == "..") return bad("\"..\" segment not allowed");
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return Status::Ok();
}

Result<std::string> EncodeManifest(const Manifest& m) {
  BDN_RETURN_IF_ERROR(m.chunker.Validate());
  BDN_RETURN_IF_ERROR(CheckEntries(
      m, [](const std::string& why) { return InvalidArgumentError("manifest: " + why); }));
  Writer w;
  w.Bytes(kManifestMagic, 4);
  w.U32(kFormatVersion);
  w.U8(kAlgorithmFastCdc2020);
  w.U32(m.chunker.min_bytes);
  w.U32(m.chunker.avg_bytes);
  w.U32(m.chunker.max_bytes);
  w.U8(m.has_mtimes ? kFlagMtimes : 0);
  w.U64(m.entries.size());
  for (const Entry& e : m.entries) {
    w.U8(static_cast<uint8_t>(e.kind));
    w.U16(e.mode);
    w.Str(e.path);
    switch (e.kind) {
      case EntryKind::kDirectory:
        break;
      case EntryKind::kFile:
        w.U64(e.size_bytes);
        w.U8(static_cast<uint8_t>(e.layout));
        w.Dig(e.digest);
        if (e.layout == FileLayout::kIndexed) w.Dig(e.index);
        break;
      case EntryKind::kSymlink:
      case EntryKind::kHardlink:
        w.Str(e.target);
        break;
    }
    if (m.has_mtimes) w.U64(static_cast<uint64_t>(*e.mtime_ns));
  }
  return w.Take();
}

Result<Manifest> DecodeManifest(std::span<const uint8_t> bytes) {
  Reader r(bytes, "manifest");
  BDN_RETURN_IF_ERROR(r.Magic(kManifestMagic));
  BDN_ASSIGN_OR_RETURN(uint64_t version, r.Le(4));
  if (version != kFormatVersion) {
    return Err(r.Fail("unsupported format version " + std::to_string(version)));
  }
  BDN_ASSIGN_OR_RETURN(uint64_t algorithm, r.Le(1));
  if (algorithm != kAlgorithmFastCdc2020) {
    return Err(r.Fail("unknown chunker algorithm " + std::to_string(algorithm)));
  }
  Manifest m;
  BDN_ASSIGN_OR_RETURN(uint64_t min, r.Le(4));
  BDN_ASSIGN_OR_RETURN(uint64_t avg, r.Le(4));
  BDN_ASSIGN_OR_RETURN(uint64_t max, r.Le(4));
  m.chunker = {static_cast<uint32_t>(min), static_cast<uint32_t>(avg), static_cast<uint32_t>(max)};
  if (Status s = m.chunker.Validate(); !s.ok()) return Err(r.Fail(s.message()));
  BDN_ASSIGN_OR_RETURN(uint64_t flags, r.Le(1));
  if (flags & ~uint64_t{kFlagMtimes}) return Err(r.Fail("unknown flags"));
  m.has_mtimes = flags & kFlagMtimes;
  BDN_ASSIGN_OR_RETURN(uint64_t count, r.Le(8));
  // Each entry takes at least 7 bytes; refuse counts the input cannot hold before reserving.
  if (count > bytes.size() / 7)
    return Err(r.Fail("entry count " + std::to_string(count) + " exceeds the input"));
  // An Entry is far larger than its 7 encoded bytes: reserve only a little ahead of the input,
  // so that a count the input does not hold costs no memory before the decode fails.
  m.entries.reserve(std::min<uint64_t>(count, 4096));
  for (uint64_t i = 0; i < count; ++i) {
    Entry e;
    BDN_ASSIGN_OR_RETURN(uint64_t kind, r.Le(1));
    if (kind < 1 || kind > 4) return Err(r.Fail("unknown entry kind " + std::to_string(kind)));
    e.kind = static_cast<EntryKind>(kind);
    BDN_ASSIGN_OR_RETURN(uint64_t mode, r.Le(2));
    e.mode = static_cast<uint16_t>(mode);
    BDN_ASSIGN_OR_RETURN(e.path, r.Str());
    switch (e.kind) {
      case EntryKind::kDirectory:
        break;
      case EntryKind::kFile: {
        BDN_ASSIGN_OR_RETURN(e.size_bytes, r.Le(8));
        BDN_ASSIGN_OR_RETURN(uint64_t layout, r.Le(1));
        if (layout > 2) return Err(r.Fail("unknown file layout " + std::to_string(layout)));
        e.layout = static_cast<FileLayout>(layout);
        BDN_ASSIGN_OR_RETURN(e.digest, r.Dig());
        if (e.layout == FileLayout::kIndexed) {
          BDN_ASSIGN_OR_RETURN(e.index, r.Dig());
        }
        break;
      }
      case EntryKind::kSymlink:
      case EntryKind::kHardlink: {
        BDN_ASSIGN_OR_RETURN(e.target, r.Str());
        break;
      }
    }
    if (m.has_mtimes) {
      BDN_ASSIGN_OR_RETURN(uint64_t t, r.Le(8));
      e.mtime_ns = static_cast<int64_t>(t);
    }
    m.entries.push_back(std::move(e));
  }
  if (!r.AtEnd()) return Err(r.Fail("trailing bytes"));
  BDN_RETURN_IF_ERROR(
      CheckEntries(m, [](const std::string& why) { return CorruptionError("manifest: " + why); }));
  return m;
}

Status CheckChunkLength(const ChunkRef& ref, uint64_t real_bytes) {
  if (real_bytes == ref.size_bytes) return Status::Ok();
  return CorruptionError("chunk " + ref.id.ToString() + ": is " + std::to_string(real_bytes) +
                         " bytes, the version says " + std::to_string(ref.size_bytes));
}

}  // namespace bdn
