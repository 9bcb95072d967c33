#include "bdn/cli/output.h"

#include <algorithm>
#include <ctime>
#include <iostream>

#include "bdn/base/hex.h"
#include "bdn/base/text.h"
#include "bdn/base/units.h"

namespace bdn::cli {
namespace {
bool g_result_printed = false;
}  // namespace

void PrintJson(const nlohmann::json& j) {
  std::cout << JsonText(j) << std::endl;
  g_result_printed = true;
}

bool ResultPrinted() { return g_result_printed; }

namespace {
bool g_stdout_is_data = false;
}  // namespace

void MarkStdoutAsData() { g_stdout_is_data = true; }
bool StdoutIsData() { return g_stdout_is_data; }

std::string FormatUnixMs(int64_t unix_ms) { return FormatUtc(unix_ms); }

void PutLocalPath(nlohmann::json& j, const std::string& key, const std::string& path) {
  j[key] = path;
  if (!IsValidUtf8(path)) j[key + "_hex"] = HexEncode(std::string_view(path));
}

void PutLocalPaths(nlohmann::json& j, const std::string& key,
                   const std::vector<std::string>& paths) {
  j[key] = paths;
  if (std::all_of(paths.begin(), paths.end(),
                  [](const std::string& p) { return IsValidUtf8(p); })) {
    return;
  }
  nlohmann::json hex = nlohmann::json::array();
  for (const std::string& p : paths) hex.push_back(HexEncode(std::string_view(p)));
  j[key + "_hex"] = std::move(hex);
}

std::string JsonText(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace bdn::cli
