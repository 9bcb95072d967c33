// GoogleTest assertions on Status and Result<T> that print the status when they fail:
//   ASSERT_OK(store.Put(...));          // fails with: store.Put(...) is not found: chunk b3:…
//   EXPECT_OK(ParseRef("bdn:w/v"));     // a Result<T>: passes when it holds a value
//   EXPECT_STATUS(r, kNotFound, "chunk b3:");  // the code, and a message that starts so
// Each evaluates its argument once. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "bdn/base/status.h"

namespace bdn::testutil {

inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.has_value() ? Status::Ok() : r.error();
}

// "OK", or "<code name>: <message>", e.g. "not found: chunk b3:00 is not in the store".
inline std::string Describe(const Status& s) {
  return s.ok() ? std::string("OK") : std::string(StatusCodeName(s.code())) + ": " + s.message();
}

// The predicate formatter behind ASSERT_OK/EXPECT_OK.
template <typename T>
::testing::AssertionResult IsOk(const char* text, const T& v) {
  const Status s = StatusOf(v);
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text << " is " << Describe(s);
}

// The predicate formatter behind EXPECT_STATUS: the code, and a message that starts with
// `prefix`.
template <typename T>
::testing::AssertionResult HasStatus(const char* text, const char*, const char*, const T& v,
                                     StatusCode code, std::string_view prefix) {
  const Status s = StatusOf(v);
  if (s.code() == code && s.message().starts_with(prefix)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << text << " is " << Describe(s) << ", expected code " << StatusCodeName(code)
         << " and a message starting \"" << prefix << "\"";
}

}  // namespace bdn::testutil

#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::bdn::testutil::IsOk, expr)
#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::bdn::testutil::IsOk, expr)
#define EXPECT_STATUS(expr, code, prefix) \
  EXPECT_PRED_FORMAT3(::bdn::testutil::HasStatus, expr, ::bdn::StatusCode::code, prefix)
