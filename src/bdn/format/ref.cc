#include "bdn/format/ref.h"

#include <cctype>

#include "bdn/format/manifest.h"

namespace bdn {
namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}
bool TagChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

std::string Quote(char c) {
  if (std::isprint(static_cast<unsigned char>(c))) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
  return buf;
}

}  // namespace

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
    if (!NameChar(c)) return bad("invalid character " + Quote(c) + " (allowed: a-z 0-9 . _ -)");
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
    if (!TagChar(c)) return bad("invalid character " + Quote(c) + " (allowed: A-Z a-z 0-9 . _ -)");
  }
  return Status::Ok();
}

std::string Ref::ToString() const {
  std::string s = "bdn:" + ns;
  if (!volume.empty()) s += "/" + volume;
  if (tag) s += ":" + *tag;
  if (digest) s += "@b3:" + *digest;
  if (!path.empty()) s += "/" + path;
  return s;
}

Result<Ref> ParseRef(std::string_view text, RefForm form) {
  const std::string prefix = "ref \"" + std::string(text) + "\": ";
  auto bad = [&](const std::string& why) { return Err(InvalidArgumentError(prefix + why)); };
  auto wrap = [&](const Status& s) { return Err(InvalidArgumentError(prefix + s.message())); };
  if (!text.starts_with("bdn:")) return bad("must start with \"bdn:\"");
  std::string_view rest = text.substr(4);
  Ref ref;

  size_t slash = rest.find('/');
  std::string_view ns = rest.substr(0, slash);
  for (char c : ns) ref.ns += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ref.ns.empty()) return bad("namespace is empty");
  if (Status s = ValidateName("namespace", ref.ns); !s.ok()) return wrap(s);
  if (slash == std::string_view::npos) {
    if (form == RefForm::kNamespace) return ref;
    return bad("volume is missing (expected bdn:<namespace>/<volume>)");
  }
  rest = rest.substr(slash + 1);

  // The volume runs to the first ':', '@' or '/'.
  size_t end = rest.find_first_of(":@/");
  std::string_view vol = rest.substr(0, end);
  for (char c : vol) ref.volume += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ref.volume.empty()) return bad("volume is empty");
  if (Status s = ValidateName("volume", ref.volume); !s.ok()) return wrap(s);
  rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);

  if (!rest.empty() && (rest[0] == ':' || rest[0] == '@')) {
    char kind = rest[0];
    rest.remove_prefix(1);
    // A digest's "b3:" prefix contains ':', so skip it before looking for the path.
    size_t skip = (kind == '@' && rest.starts_with("b3:")) ? 3 : 0;
    size_t sel_end = rest.find('/', skip);
    std::string_view sel = rest.substr(0, sel_end);
    rest = sel_end == std::string_view::npos ? std::string_view() : rest.substr(sel_end);
    if (kind == ':') {
      if (sel.find('@') != std::string_view::npos) {
        return bad("a ref takes a tag or a digest, not both");
      }
      if (Status s = ValidateTag(sel); !s.ok()) return wrap(s);
      ref.tag = std::string(sel);
    } else {
      std::string_view hex = sel;
      if (hex.starts_with("b3:")) hex.remove_prefix(3);
      std::string d;
      for (char c : hex) {
        char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (!std::isxdigit(static_cast<unsigned char>(c))) {
          return bad("digest \"" + std::string(sel) + "\": invalid character " + Quote(c) +
                     " (expected hex)");
        }
        d += l;
      }
      if (d.empty()) return bad("digest is empty");
      if (d.size() < 12) {
        return bad("digest \"" + std::string(sel) + "\": too short, need at least 12 hex characters");
      }
      if (d.size() > 64) {
        return bad("digest \"" + std::string(sel) + "\": longer than 64 hex characters");
      }
      ref.digest = d;
    }
  }
  if (!rest.empty()) {
    // rest starts with '/': the path.
    std::string_view path = rest.substr(1);
    if (path.empty()) return bad("path is empty after '/'");
    if (Status s = ValidateEntryPath(path); !s.ok()) return wrap(s);
    ref.path = std::string(path);
  }
  return ref;
}

}  // namespace bdn
