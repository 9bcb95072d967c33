#include "bdn/base/names.h"

#include <cctype>
#include <cstdio>

namespace bdn {
namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}
bool TagChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

}  // namespace

std::string QuoteChar(char c) {
  if (std::isprint(static_cast<unsigned char>(c))) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
  return buf;
}

Status ValidateName(std::string_view what, std::string_view name) {
  std::string w(what);
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(w + " \"" + std::string(name) + "\": " + why);
  };
  if (name.empty()) return InvalidArgumentError(w + " is empty");
  if (name.size() > 128) return bad("longer than 128 characters");
  if (name[0] == '.' || name[0] == '_' || name[0] == '-') {
    return bad("must start with a letter or digit");
  }
  for (char c : name) {
    if (!NameChar(c)) return bad("invalid character " + QuoteChar(c) + " (allowed: a-z 0-9 . _ -)");
  }
  return Status::Ok();
}

Status ValidateTag(std::string_view tag) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("tag \"" + std::string(tag) + "\": " + why);
  };
  if (tag.empty()) return InvalidArgumentError("tag is empty");
  if (tag.size() > 128) return bad("longer than 128 characters");
  if (tag[0] == '.' || tag[0] == '-') return bad("must start with a letter, digit or '_'");
  for (char c : tag) {
    if (!TagChar(c))
      return bad("invalid character " + QuoteChar(c) + " (allowed: A-Z a-z 0-9 . _ -)");
  }
  return Status::Ok();
}

}  // namespace bdn
