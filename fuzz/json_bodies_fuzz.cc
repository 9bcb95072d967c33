// Fuzzes the decoders of the JSON bodies the HTTP API carries: the origin's request-body readers
// (origin/request_json.h), the record codecs both sides use (api/records_json.h,
// api/sync_json.h) and the error body a client reads (http/errors.h). Every error is
// InvalidArgument; a decoded record encodes to JSON that decodes to the same record, and every
// number it took from the input is that number exactly (no float read as an integer, no wrap, no
// clamp).
#include "bdn/api/records_json.h"
#include "bdn/api/sync_json.h"
#include "bdn/http/errors.h"
#include "bdn/origin/request_json.h"
#include "fuzz_check.h"

namespace {

using namespace bdn;
using nlohmann::json;

void CheckError(const Status& s) {
  FUZZ_CHECK(!s.ok() && s.code() == StatusCode::kInvalidArgument && !s.message().empty(),
             s.ToString());
}

// Whether the value `out` the codec wrote for a field agrees with the value `in` it read:
// numbers are the same integer, strings the same up to ASCII case and a "b3:" prefix (digests),
// objects agree on the keys both hold, arrays element by element.
bool Agrees(const json& in, const json& out) {
  if (in.is_null()) return true;  // read as missing: the codec's default
  if (in.is_number() || out.is_number()) {
    if (!in.is_number_integer() || !out.is_number_integer()) return false;
    auto wide = [](const json& j) -> __int128 {
      return j.is_number_unsigned() ? static_cast<__int128>(j.get<uint64_t>())
                                    : static_cast<__int128>(j.get<int64_t>());
    };
    return wide(in) == wide(out);
  }
  if (in.is_string() && out.is_string()) {
    std::string a = in.get<std::string>(), b = out.get<std::string>();
    if (a.starts_with("b3:") && !b.starts_with("b3:")) a.erase(0, 3);
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
      return std::tolower(static_cast<unsigned char>(x)) ==
             std::tolower(static_cast<unsigned char>(y));
    });
  }
  if (in.is_object() && out.is_object()) {
    for (const auto& [k, v] : in.items()) {
      if (out.contains(k) && !Agrees(v, out[k])) return false;
    }
    return true;
  }
  if (in.is_array() && out.is_array()) {
    if (in.size() != out.size()) return false;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!Agrees(in[i], out[i])) return false;
    }
    return true;
  }
  return in == out;
}

// Decodes `j` with `from`; if it decodes, its encoding must agree with `j` and decode again to
// the same encoding.
template <typename From, typename To>
void RoundTrip(const char* what, const json& j, From from, To to) {
  auto r = from(j);
  if (!r) return CheckError(r.error());
  json out = to(*r);
  FUZZ_CHECK(Agrees(j, out), std::string(what) + ": " + j.dump() + " -> " + out.dump());
  auto again = from(out);
  FUZZ_CHECK(again.has_value(),
             std::string(what) + ": " + out.dump() + ": " + again.error().ToString());
  FUZZ_CHECK(to(*again) == out, std::string(what) + ": " + out.dump());
}

void CheckRecords(const json& j) {
  RoundTrip("stats", j, api::StatsFromJson, api::StatsToJson);
  RoundTrip("volume", j, api::VolumeFromJson, api::VolumeToJson);
  RoundTrip("version", j, api::VersionFromJson, api::VersionToJson);
  RoundTrip("commit result", j, api::CommitResultFromJson, api::CommitResultToJson);
  std::optional<std::string> claim;
  RoundTrip(
      "commit request", j, [&](const json& in) { return api::CommitRequestFromJson(in, &claim); },
      [&](const CommitRequest& req) { return api::CommitRequestToJson(req, claim); });
}

// The sync records: "dest" and "version_ref" are derived by the encoder from the other fields
// (never read), so they are left out of the comparison.
void CheckSyncRecords(const json& j) {
  json in = j;
  if (in.is_object()) {
    in.erase("dest");
    in.erase("version_ref");
  }
  RoundTrip("sync job spec", in, api::SyncJobSpecFromJson, api::SyncJobSpecToJson);
  RoundTrip("sync job", in, api::SyncJobFromJson, api::SyncJobToJson);
  RoundTrip("secret info", in, api::SecretInfoFromJson, api::SecretInfoToJson);
}

void CheckFields(const json& j) {
  if (auto d = origin::DigestField(j, "digest"); !d) CheckError(d.error());
  auto i = origin::OptionalIntField(j, "expected_sequence");
  if (!i) {
    CheckError(i.error());
  } else if (*i) {
    FUZZ_CHECK(Agrees(j["expected_sequence"], json(**i)), j.dump());
  }
  if (auto s = origin::OptionalStringField(j, "claim"); !s) CheckError(s.error());
  if (auto l = origin::StringListField(j, "tags"); !l) CheckError(l.error());
  auto ids = origin::IdsField(j, 4);
  if (!ids) {
    CheckError(ids.error());
  } else {
    FUZZ_CHECK(ids->size() <= 4 && ids->size() == j["ids"].size(), j.dump());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::Text(data, size);
  if (auto s = http::ParseErrorBody(text)) {
    FUZZ_CHECK(!s->ok(), "an error body parsed to an ok Status");
  }
  auto body = origin::ParseBody(text);
  if (!body) {
    CheckError(body.error());
    FUZZ_CHECK(body.error().message().starts_with("request body: "), body.error().ToString());
    return 0;
  }
  FUZZ_CHECK(body->is_object(), std::string(text));
  CheckFields(*body);
  CheckRecords(*body);
  CheckSyncRecords(*body);
  if (body->contains("stats")) CheckRecords((*body)["stats"]);
  return 0;
}
