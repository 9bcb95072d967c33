#include "bdn/objstore/xml_listing.h"

#include <expat.h>

#include <functional>
#include <memory>

#include "bdn/base/text.h"  // PercentDecode, ParseByteCount

namespace bdn::objstore {
namespace {

constexpr size_t kMaxDepth = 32;
constexpr size_t kMaxText = 64 * 1024;
// expat is fed pieces of this size, so a huge document is never copied whole.
constexpr size_t kFeedBytes = 1 << 20;

// Walks a document with expat, handing each element's start (with its attributes) and its end
// (with its text, for elements without children) to the callbacks, with the names of the
// elements above it. Refuses DOCTYPE, deep nesting and long texts.
class XmlWalker {
 public:
  struct Element {
    std::string name;
    std::string text;      // the text of an element without children
    bool encoded = false;  // Encoded="true" (Azure)
    bool has_children = false;
  };
  // path: the open elements, outermost first (the element itself last).
  std::function<Status(const std::vector<Element>& path)> on_start;
  std::function<Status(const std::vector<Element>& path)> on_end;

  Status Parse(std::string_view xml) {
    std::unique_ptr<XML_ParserStruct, decltype(&XML_ParserFree)> p(XML_ParserCreate("UTF-8"),
                                                                   XML_ParserFree);
    if (!p) return InternalError("cannot create an XML parser");
    parser_ = p.get();
    XML_SetUserData(parser_, this);
    XML_SetElementHandler(parser_, &Start, &End);
    XML_SetCharacterDataHandler(parser_, &Text);
    XML_SetStartDoctypeDeclHandler(parser_, &Doctype);
    XML_SetEntityDeclHandler(parser_, &Entity);
    do {
      std::string_view piece = xml.substr(0, kFeedBytes);
      xml.remove_prefix(piece.size());
      if (XML_Parse(parser_, piece.data(), static_cast<int>(piece.size()), xml.empty()) !=
          XML_STATUS_OK) {
        if (!error_.ok()) return error_;
        return InvalidArgumentError(std::string("not XML: ") +
                                    XML_ErrorString(XML_GetErrorCode(parser_)) + " at line " +
                                    std::to_string(XML_GetCurrentLineNumber(parser_)));
      }
    } while (!xml.empty());
    return error_;
  }

 private:
  void Fail(Status s) {
    if (error_.ok()) error_ = std::move(s);
    XML_StopParser(parser_, XML_FALSE);
  }
  static void Start(void* user, const XML_Char* name, const XML_Char** attrs) {
    auto* w = static_cast<XmlWalker*>(user);
    if (!w->error_.ok()) return;
    if (w->path_.size() >= kMaxDepth) {
      return w->Fail(InvalidArgumentError("elements nested deeper than " +
                                          std::to_string(kMaxDepth) + " levels"));
    }
    if (!w->path_.empty()) {
      // The whitespace between an element's children is no field: never kept, never counted.
      w->path_.back().has_children = true;
      w->path_.back().text.clear();
    }
    Element e{name, "", false, false};
    for (size_t i = 0; attrs[i] != nullptr; i += 2) {
      if (std::string_view(attrs[i]) == "Encoded" && std::string_view(attrs[i + 1]) == "true") {
        e.encoded = true;
      }
    }
    w->path_.push_back(std::move(e));
    if (w->on_start) {
      if (Status s = w->on_start(w->path_); !s.ok()) w->Fail(std::move(s));
    }
  }
  static void End(void* user, const XML_Char*) {
    auto* w = static_cast<XmlWalker*>(user);
    if (!w->error_.ok()) return;
    if (w->on_end) {
      if (Status s = w->on_end(w->path_); !s.ok()) return w->Fail(std::move(s));
    }
    w->path_.pop_back();
  }
  static void Text(void* user, const XML_Char* s, int len) {
    auto* w = static_cast<XmlWalker*>(user);
    if (!w->error_.ok() || w->path_.empty() || w->path_.back().has_children) return;
    std::string& text = w->path_.back().text;
    if (text.size() + static_cast<size_t>(len) > kMaxText) {
      return w->Fail(InvalidArgumentError("<" + w->path_.back().name + "> holds more than " +
                                          std::to_string(kMaxText) + " bytes of text"));
    }
    text.append(s, static_cast<size_t>(len));
  }
  static void Doctype(void* user, const XML_Char*, const XML_Char*, const XML_Char*, int) {
    static_cast<XmlWalker*>(user)->Fail(
        InvalidArgumentError("a document type declaration is refused"));
  }
  static void Entity(void* user, const XML_Char*, int, const XML_Char*, int, const XML_Char*,
                     const XML_Char*, const XML_Char*, const XML_Char*) {
    static_cast<XmlWalker*>(user)->Fail(InvalidArgumentError("an entity declaration is refused"));
  }

  XML_Parser parser_ = nullptr;
  std::vector<Element> path_;
  Status error_;
};

// Whether `path` is exactly the element names `names` (outermost first).
bool At(const std::vector<XmlWalker::Element>& path,
        std::initializer_list<std::string_view> names) {
  if (path.size() != names.size()) return false;
  size_t i = 0;
  for (std::string_view n : names) {
    if (path[i++].name != n) return false;
  }
  return true;
}

// The fields of one entry as they arrive, checked once it ends.
struct Pending {
  std::optional<std::string> key, size, etag;
  bool directory = false;
};

Status SetOnce(std::optional<std::string>& field, const XmlWalker::Element& e, size_t entry,
               std::string_view entry_name) {
  if (field) {
    return InvalidArgumentError("<" + std::string(entry_name) + "> #" + std::to_string(entry) +
                                " has two <" + e.name + ">");
  }
  field = e.encoded ? PercentDecode(e.text) : e.text;
  return Status::Ok();
}

Result<ListedObject> Finish(const Pending& p, size_t entry, std::string_view entry_name,
                            std::string_view key_name, std::string_view size_name) {
  auto missing = [&](std::string_view what) {
    return Err(InvalidArgumentError("<" + std::string(entry_name) + "> #" + std::to_string(entry) +
                                    " has no <" + std::string(what) + ">"));
  };
  if (!p.key) return missing(key_name);
  if (p.key->empty()) {
    return Err(InvalidArgumentError("<" + std::string(entry_name) + "> #" + std::to_string(entry) +
                                    " has an empty <" + std::string(key_name) + ">"));
  }
  if (!p.size) return missing(size_name);
  auto size = ParseByteCount(*p.size);
  if (!size) {
    return Err(InvalidArgumentError("<" + std::string(size_name) + "> \"" + EscapeName(*p.size) +
                                    "\" of \"" + EscapeName(*p.key) + "\" is not a byte count"));
  }
  return ListedObject{*p.key, *size, p.etag.value_or("")};
}

Status ExpectRoot(const std::vector<XmlWalker::Element>& path, std::string_view root) {
  if (path.size() == 1 && path[0].name != root) {
    return InvalidArgumentError("expected <" + std::string(root) + ">, got <" +
                                EscapeName(path[0].name) + ">");
  }
  return Status::Ok();
}

}  // namespace

Result<S3ListPage> ParseS3ListPage(std::string_view xml) {
  S3ListPage page;
  std::optional<std::string> truncated, token;
  Pending entry;
  size_t entries = 0;
  bool saw_root = false;
  XmlWalker w;
  w.on_start = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    BDN_RETURN_IF_ERROR(ExpectRoot(path, "ListBucketResult"));
    saw_root = true;
    if (At(path, {"ListBucketResult", "Contents"})) {
      entry = Pending();
      ++entries;
    }
    return Status::Ok();
  };
  w.on_end = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    const XmlWalker::Element& e = path.back();
    if (At(path, {"ListBucketResult", "Contents", "Key"}))
      return SetOnce(entry.key, e, entries, "Contents");
    if (At(path, {"ListBucketResult", "Contents", "Size"}))
      return SetOnce(entry.size, e, entries, "Contents");
    if (At(path, {"ListBucketResult", "Contents", "ETag"}))
      return SetOnce(entry.etag, e, entries, "Contents");
    if (At(path, {"ListBucketResult", "Contents"})) {
      BDN_ASSIGN_OR_RETURN(ListedObject o, Finish(entry, entries, "Contents", "Key", "Size"));
      page.objects.push_back(std::move(o));
      return Status::Ok();
    }
    if (At(path, {"ListBucketResult", "IsTruncated"})) {
      if (truncated) return InvalidArgumentError("two <IsTruncated>");
      truncated = e.text;
    }
    if (At(path, {"ListBucketResult", "NextContinuationToken"})) {
      if (token) return InvalidArgumentError("two <NextContinuationToken>");
      token = e.text;
    }
    return Status::Ok();
  };
  BDN_RETURN_IF_ERROR(w.Parse(xml));
  if (!saw_root)
    return Err(InvalidArgumentError("expected <ListBucketResult>, got an empty document"));
  if (truncated && *truncated != "true" && *truncated != "false") {
    return Err(InvalidArgumentError("<IsTruncated> \"" + EscapeName(*truncated) +
                                    "\" is neither true nor false"));
  }
  page.truncated = truncated && *truncated == "true";
  if (page.truncated) {
    if (!token || token->empty()) {
      return Err(InvalidArgumentError("IsTruncated is true without a NextContinuationToken"));
    }
    page.next_token = *token;
  }
  return page;
}

Result<AzureListPage> ParseAzureListPage(std::string_view xml) {
  AzureListPage page;
  std::optional<std::string> marker;
  Pending entry;
  size_t entries = 0;
  bool saw_root = false;
  XmlWalker w;
  w.on_start = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    BDN_RETURN_IF_ERROR(ExpectRoot(path, "EnumerationResults"));
    saw_root = true;
    if (At(path, {"EnumerationResults", "Blobs", "Blob"})) {
      entry = Pending();
      ++entries;
    }
    return Status::Ok();
  };
  w.on_end = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    const XmlWalker::Element& e = path.back();
    if (At(path, {"EnumerationResults", "Blobs", "Blob", "Name"}))
      return SetOnce(entry.key, e, entries, "Blob");
    if (At(path, {"EnumerationResults", "Blobs", "Blob", "Properties", "Content-Length"})) {
      return SetOnce(entry.size, e, entries, "Blob");
    }
    if (At(path, {"EnumerationResults", "Blobs", "Blob", "Properties", "Etag"})) {
      return SetOnce(entry.etag, e, entries, "Blob");
    }
    if (At(path, {"EnumerationResults", "Blobs", "Blob", "Properties", "ResourceType"})) {
      entry.directory = e.text == "directory";
    }
    if (At(path, {"EnumerationResults", "Blobs", "Blob"})) {
      BDN_ASSIGN_OR_RETURN(ListedObject o,
                           Finish(entry, entries, "Blob", "Name", "Content-Length"));
      if (!entry.directory) page.blobs.push_back(std::move(o));
      return Status::Ok();
    }
    if (At(path, {"EnumerationResults", "NextMarker"})) {
      if (marker) return InvalidArgumentError("two <NextMarker>");
      marker = e.text;
    }
    return Status::Ok();
  };
  BDN_RETURN_IF_ERROR(w.Parse(xml));
  if (!saw_root)
    return Err(InvalidArgumentError("expected <EnumerationResults>, got an empty document"));
  page.next_marker = marker.value_or("");
  return page;
}

std::optional<StoreError> ParseStoreError(std::string_view xml) {
  StoreError out;
  bool root = false;
  XmlWalker w;
  w.on_start = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    if (path.size() == 1) root = path[0].name == "Error";
    return Status::Ok();
  };
  w.on_end = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    if (path.size() == 2 && root) {
      if (path[1].name == "Code") out.code = path[1].text;
      if (path[1].name == "Message") out.message = path[1].text;
    }
    return Status::Ok();
  };
  if (!w.Parse(xml).ok() || !root || out.code.empty()) return std::nullopt;
  return out;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Result<std::vector<DeleteFailure>> ParseDeleteResult(std::string_view xml) {
  std::vector<DeleteFailure> out;
  std::optional<DeleteFailure> cur;
  bool saw_root = false, has_key = false;
  XmlWalker w;
  w.on_start = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    BDN_RETURN_IF_ERROR(ExpectRoot(path, "DeleteResult"));
    saw_root = true;
    if (At(path, {"DeleteResult", "Error"})) {
      cur.emplace();
      has_key = false;
    }
    return Status::Ok();
  };
  w.on_end = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    if (!cur) return Status::Ok();
    if (At(path, {"DeleteResult", "Error", "Key"})) {
      cur->key = path.back().text;
      has_key = true;
    } else if (At(path, {"DeleteResult", "Error", "Code"})) {
      cur->code = path.back().text;
    } else if (At(path, {"DeleteResult", "Error", "Message"})) {
      cur->message = path.back().text;
    } else if (At(path, {"DeleteResult", "Error"})) {
      if (!has_key) {
        return InvalidArgumentError("<Error> #" + std::to_string(out.size() + 1) + " has no <Key>");
      }
      out.push_back(std::move(*cur));
      cur.reset();
    }
    return Status::Ok();
  };
  BDN_RETURN_IF_ERROR(w.Parse(xml));
  if (!saw_root) return Err(InvalidArgumentError("expected <DeleteResult>, got an empty document"));
  return out;
}

Result<std::string> ParseUploadId(std::string_view xml) {
  std::optional<std::string> id;
  bool saw_root = false;
  XmlWalker w;
  w.on_start = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    BDN_RETURN_IF_ERROR(ExpectRoot(path, "InitiateMultipartUploadResult"));
    saw_root = true;
    return Status::Ok();
  };
  w.on_end = [&](const std::vector<XmlWalker::Element>& path) -> Status {
    if (At(path, {"InitiateMultipartUploadResult", "UploadId"})) {
      if (id) return InvalidArgumentError("two <UploadId>");
      id = path.back().text;
    }
    return Status::Ok();
  };
  BDN_RETURN_IF_ERROR(w.Parse(xml));
  if (!saw_root) {
    return Err(
        InvalidArgumentError("expected <InitiateMultipartUploadResult>, got an empty document"));
  }
  if (!id || id->empty()) return Err(InvalidArgumentError("no <UploadId>"));
  return *id;
}

}  // namespace bdn::objstore
