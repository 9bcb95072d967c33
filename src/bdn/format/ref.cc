#include "bdn/format/ref.h"

#include <cctype>

#include "bdn/format/manifest.h"

namespace bdn {

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
          return bad("digest \"" + std::string(sel) + "\": invalid character " + QuoteChar(c) +
                     " (expected hex)");
        }
        d += l;
      }
      if (d.empty()) return bad("digest is empty");
      if (d.size() < 12) {
        return bad("digest \"" + std::string(sel) +
                   "\": too short, need at least 12 hex characters");
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
    // A directory named as a shell completes it ("tokenizer/"): refused, saying how to name it.
    if (path.size() > 1 && path.ends_with('/') && !path.ends_with("//") &&
        ValidateEntryPath(path.substr(0, path.size() - 1)).ok()) {
      return bad("path \"" + std::string(path) + "\": ends with '/' (name the entry without it: " +
                 std::string(text.substr(0, text.size() - 1)) + ")");
    }
    if (Status s = ValidateEntryPath(path); !s.ok()) return wrap(s);
    ref.path = std::string(path);
  }
  return ref;
}

}  // namespace bdn
