// Text helpers for names that come from a file system or a manifest: UTF-8 validation and the
// one escaping that every text output uses for names (control bytes and invalid UTF-8 shown as
// C escapes, so a name can neither break a line nor a terminal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bdn {

// Whether `s` is well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above
// U+10FFFF, no truncated sequence. The empty string is valid. Thread-safe.
bool IsValidUtf8(std::string_view s);

enum class Backslashes {
  kEscape,  // "\" becomes "\\", so the escaped text maps back to exactly one name (like ls -b)
  kKeep,    // "\" stays: for messages whose names were already escaped where they were built
};

// `s` as one line of text: \n, \t, \r as themselves escaped, other control bytes (0x00-0x1f,
// 0x7f) and every byte that is not part of a valid UTF-8 sequence as \xHH (two lower-case hex
// digits); the code points that break a line for some readers, turn text around or show as
// nothing (C1 controls such as U+0085 NEL, U+2028, U+2029, U+FFF9-U+FFFB, and Unicode's
// Default_Ignorable_Code_Point set: the bidirectional controls U+061C, U+200E, U+200F,
// U+202A-U+202E, U+2066-U+2069, the soft hyphen U+00AD, U+200B-U+200D, U+2060-U+2064, the Hangul
// fillers, the variation selectors, U+FEFF and the rest) as \uXXXX (four lower-case hex digits),
// those above U+FFFF (the tags U+E0000-U+E007F) as \UXXXXXXXX; other valid UTF-8 (printable
// ASCII included) unchanged. The
// result is valid UTF-8 with no control or invisible format character, so a name never ends,
// reorders or hides part of the line it is quoted in. Thread-safe.
std::string EscapeName(std::string_view s, Backslashes backslashes = Backslashes::kEscape);

// Percent-encodes (RFC 3986) every byte but A-Z a-z 0-9 - _ . ~ and those in `safe`, with
// upper-case hex digits: for URL paths and query values. Thread-safe.
std::string PercentEncode(std::string_view s, std::string_view safe = "");
// Decodes %XX escapes (a malformed escape is kept as it is; '+' stays '+'). Thread-safe.
std::string PercentDecode(std::string_view s);

// "1 file", "2 files", "0 files": `n` and `noun` ("file", "chunk": a noun whose plural takes
// an "s"), for messages. Thread-safe.
std::string Counted(uint64_t n, std::string_view noun);

// A decimal count of at most 19 digits, no sign or spaces (a Content-Length, an S3 <Size>, a GCS
// "size"); nullopt for anything else. Thread-safe.
std::optional<uint64_t> ParseByteCount(std::string_view s);

}  // namespace bdn
