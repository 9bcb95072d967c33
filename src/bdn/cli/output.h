// The one JSON serialization of the CLI's results and errors: it never fails on a string that is
// not UTF-8. (Text output escapes names with EscapeName, base/text.h.)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bdn::cli {

// `j` as JSON text indented by 2. Names from a version are valid UTF-8 (docs/format.md) and come
// out exactly (control characters as JSON escapes); any other string that is not valid UTF-8 (a
// local path, say) has each invalid byte replaced by U+FFFD instead of failing. Thread-safe.
std::string JsonText(const nlohmann::json& j);

// Sets j[key] to `path`, a local path (a mountpoint), which may hold bytes that are not UTF-8:
// then JsonText shows them as U+FFFD, so j[key + "_hex"] carries the path's exact bytes too, in
// lowercase hex (from an attacker: a script could not unmount the mountpoint mounts ls --json
// gave it). Thread-safe.
void PutLocalPath(nlohmann::json& j, const std::string& key, const std::string& path);
// The same for a list of local paths: j[key] the list, and where any of them is not UTF-8,
// j[key + "_hex"] the list of every one's exact bytes in lowercase hex, in the same order.
// Thread-safe.
void PutLocalPaths(nlohmann::json& j, const std::string& key,
                   const std::vector<std::string>& paths);

// Prints a command's JSON result (JsonText) on stdout and remembers that it did, so that main
// prints no JSON error after it (ResultPrinted, commands.h). Not thread-safe (one per command).
void PrintJson(const nlohmann::json& j);

// Says that the command's stdout is data from now on (cat's file bytes), so that main prints a
// JSON error on stderr instead, never after the bytes (StdoutIsData). Not thread-safe.
void MarkStdoutAsData();
bool StdoutIsData();

// A time as the CLI prints it: UTC, ISO 8601 to the second ("2025-01-31T12:00:00Z"). Thread-safe.
std::string FormatUnixMs(int64_t unix_ms);

}  // namespace bdn::cli
