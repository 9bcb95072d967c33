// What the fuzz targets share: a property check that ends the run as a crash (so libFuzzer saves
// the input), and views of the fuzzer's bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn::fuzz {

[[noreturn]] inline void Violated(const char* file, int line, const char* cond,
                                  const std::string& detail) {
  std::fprintf(stderr, "%s:%d: property violated: %s\n  %s\n", file, line, cond, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

inline std::string_view Text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

inline std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Whether `s` is an error of `code` whose message starts with `prefix`.
inline bool IsError(const Status& s, StatusCode code, std::string_view prefix) {
  return !s.ok() && s.code() == code && std::string_view(s.message()).starts_with(prefix);
}

}  // namespace bdn::fuzz

// Aborts with `detail` (a std::string expression) unless `cond` holds.
#define FUZZ_CHECK(cond, detail)                                             \
  do {                                                                       \
    if (!(cond)) ::bdn::fuzz::Violated(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)
