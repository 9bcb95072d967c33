#include "bdn/cli/output.h"

#include <ctime>
#include <iostream>

namespace bdn::cli {
namespace {
bool g_result_printed = false;
}  // namespace

void PrintJson(const nlohmann::json& j) {
  std::cout << JsonText(j) << std::endl;
  g_result_printed = true;
}

bool ResultPrinted() { return g_result_printed; }

std::string FormatUnixMs(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string JsonText(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace bdn::cli
