// Request-body field readers of the origin.
#include "bdn/origin/request_json.h"

#include <algorithm>
#include <set>
#include <utility>

#include "bdn/base/text.h"  // EscapeName

namespace bdn::origin {

using nlohmann::json;

namespace {

// nlohmann's DOM builder behind limits checked at each event: nesting depth, and the items of
// the top-level "ids" array beyond `max_ids`, which are counted and dropped. Returning false
// from an event stops the parser at once.
class BoundedSax : public nlohmann::json_sax<json> {
 public:
  BoundedSax(json& out, size_t max_ids)
      : dom_(out, /*allow_exceptions=*/false), max_ids_(max_ids) {}

  bool null() override { return Item() && (skip_ || dom_.null()); }
  bool boolean(bool v) override { return Item() && (skip_ || dom_.boolean(v)); }
  bool number_integer(number_integer_t v) override {
    return Item() && (skip_ || dom_.number_integer(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return Item() && (skip_ || dom_.number_unsigned(v));
  }
  bool number_float(number_float_t v, const string_t& s) override {
    return Item() && (skip_ || dom_.number_float(v, s));
  }
  bool string(string_t& v) override { return Item() && (skip_ || dom_.string(v)); }
  bool binary(binary_t& v) override { return Item() && (skip_ || dom_.binary(v)); }
  bool start_object(std::size_t n) override {
    if (!Item() || !Enter()) return false;
    keys_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(string_t& k) override {
    next_is_ids_ = depth_ == 1 && k == "ids";
    // The DOM keeps the last of two equal keys: a body that says two things is refused.
    if (!keys_.back().insert(k).second) {
      duplicate_ = k;
      return false;
    }
    return dom_.key(k);
  }
  bool end_object() override {
    --depth_;
    keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) override {
    bool ids = next_is_ids_ && depth_ == 1;
    if (!Item() || !Enter() || !dom_.start_array(n)) return false;
    if (ids) ids_depth_ = depth_;
    return true;
  }
  bool end_array() override {
    if (depth_ == ids_depth_) ids_depth_ = 0;
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& token,
                   const nlohmann::detail::exception& e) override {
    invalid_ = true;
    return dom_.parse_error(pos, token, e);
  }

  bool too_deep() const { return too_deep_; }
  // The index of a dropped id that is not a string, if parsing stopped at one.
  std::optional<size_t> not_string() const {
    return not_string_ ? std::optional<size_t>(not_string_ - 1) : std::nullopt;
  }
  bool invalid() const { return invalid_; }
  size_t ids() const { return ids_; }
  // The key that parsing stopped at because its object already had it.
  const std::optional<std::string>& duplicate() const { return duplicate_; }

 private:
  // Called for each value: counts the items of the "ids" array; past max_ids they are dropped.
  bool Item() {
    skip_ = false;
    if (ids_depth_ != 0 && depth_ == ids_depth_) {
      ++ids_;
      skip_ = ids_ > max_ids_;
    }
    return true;
  }
  bool Enter() {
    if (skip_) {  // a container among the dropped ids: not an id, and not stored
      not_string_ = ids_;
      return false;
    }
    if (++depth_ > kMaxBodyDepth) {
      too_deep_ = true;
      return false;
    }
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const size_t max_ids_;
  size_t depth_ = 0;
  size_t ids_depth_ = 0;  // depth of the top-level "ids" array while it is open, else 0
  size_t ids_ = 0;
  size_t not_string_ = 0;  // 1 + the index of a dropped id that is not a string
  bool next_is_ids_ = false;
  bool skip_ = false;
  bool too_deep_ = false;
  bool invalid_ = false;
  std::vector<std::set<std::string>> keys_;  // the keys of each open object, innermost last
  std::optional<std::string> duplicate_;
};

// Parses `body` under BoundedSax; `*ids` gets the full count of the top-level "ids" items.
Result<json> ParseBounded(std::string_view body, size_t max_ids, size_t* ids) {
  // nlohmann's parser would skip a UTF-8 byte order mark at the start; RFC 8259 (§8.1) says a
  // sender adds none, so a client that does is told, rather than the API reading two spellings
  // of one body.
  if (body.starts_with("\xEF\xBB\xBF")) {
    return Err(InvalidArgumentError(
        "request body: starts with a byte order mark (EF BB BF); send JSON without one"));
  }
  json j;
  BoundedSax sax(j, max_ids);
  bool ok = json::sax_parse(body, &sax, nlohmann::detail::input_format_t::json,
                            /*strict=*/true);
  if (sax.too_deep()) {
    return Err(InvalidArgumentError("request body: nested deeper than " +
                                    std::to_string(kMaxBodyDepth) + " levels"));
  }
  if (const auto& key = sax.duplicate()) {
    return Err(
        InvalidArgumentError("request body: field \"" + EscapeName(*key) + "\" appears twice"));
  }
  if (auto i = sax.not_string()) {
    return Err(InvalidArgumentError("ids[" + std::to_string(*i) + "]: must be a string"));
  }
  if (!ok || sax.invalid() || j.is_discarded()) {
    return Err(InvalidArgumentError("request body: not valid JSON"));
  }
  if (!j.is_object()) return Err(InvalidArgumentError("request body: must be a JSON object"));
  if (ids) *ids = sax.ids();
  return j;
}

}  // namespace

Result<json> ParseBody(std::string_view body) { return ParseBounded(body, SIZE_MAX, nullptr); }

Result<std::vector<Digest>> ParseIdsBody(std::string_view body, size_t max_ids) {
  size_t count = 0;
  BDN_ASSIGN_OR_RETURN(json j, ParseBounded(body, max_ids, &count));
  if (count > max_ids) {
    return Err(InvalidArgumentError("ids: " + std::to_string(count) + " ids, at most " +
                                    std::to_string(max_ids) + " per request"));
  }
  return IdsField(j, max_ids);
}

Status KnownFields(const json& body, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : body.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string names;
    for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    return InvalidArgumentError("request body: unknown field \"" + EscapeName(key) +
                                "\" (the fields are " + names + ")");
  }
  return Status::Ok();
}

Result<Digest> DigestField(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null())
    return Err(InvalidArgumentError(std::string(field) + ": missing"));
  if (!it->is_string()) return Err(InvalidArgumentError(std::string(field) + ": must be a string"));
  auto d = Digest::Parse(it->get<std::string>());
  if (!d) return Err(d.error().WithPrefix(field));
  return *d;
}

Result<std::optional<int64_t>> OptionalIntField(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer()) {
    return Err(InvalidArgumentError(std::string(field) + ": must be an integer or null"));
  }
  // get<int64_t> would wrap an unsigned value past 2^63-1 to a negative one.
  if (it->is_number_unsigned() && !std::in_range<int64_t>(it->get<uint64_t>())) {
    return Err(InvalidArgumentError(std::string(field) + ": " + it->dump() + " is out of range"));
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

Result<std::optional<std::string>> OptionalStringField(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Err(InvalidArgumentError(std::string(field) + ": must be a string or null"));
  }
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::vector<std::string>> StringListField(const json& j, const char* field) {
  std::vector<std::string> out;
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) return Err(InvalidArgumentError(std::string(field) + ": must be a list"));
  for (const json& v : *it) {
    if (!v.is_string()) {
      return Err(InvalidArgumentError(std::string(field) + ": must be a list of strings"));
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<std::vector<Digest>> IdsField(const json& j, size_t max_ids) {
  auto it = j.find("ids");
  if (it == j.end() || !it->is_array()) {
    return Err(InvalidArgumentError("ids: must be a list of chunk ids"));
  }
  if (it->size() > max_ids) {
    return Err(InvalidArgumentError("ids: " + std::to_string(it->size()) + " ids, at most " +
                                    std::to_string(max_ids) + " per request"));
  }
  std::vector<Digest> out;
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_string()) {
      return Err(InvalidArgumentError("ids[" + std::to_string(i) + "]: must be a string"));
    }
    auto d = Digest::Parse(v.get<std::string>());
    if (!d) return Err(d.error().WithPrefix("ids[" + std::to_string(i) + "]"));
    out.push_back(*d);
  }
  return out;
}

}  // namespace bdn::origin
