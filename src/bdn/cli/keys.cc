// bdn key create|ls|revoke (keys.h) over the context's origin client.
#include "bdn/cli/keys.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "bdn/api/records_json.h"
#include "bdn/base/text.h"
#include "bdn/cli/output.h"
#include "bdn/http/client.h"

namespace bdn::cli {
namespace {

using nlohmann::json;

// The origin client of `ctx`. Errors: InvalidArgument when the context is embedded (keys live
// only on an origin).
Result<http::HttpClient*> Origin(const Context& ctx) {
  if (!ctx.origin) {
    return Err(InvalidArgumentError(
        "bdn key: no origin: give --remote URL or set BDN_REMOTE (keys live on a bdn serve "
        "origin)"));
  }
  return ctx.origin.get();
}

// The JSON body of a 2xx answer to `what`. Errors: Internal "<origin>: <what>: malformed
// response: not JSON".
Result<json> JsonBody(const http::HttpClient& client, const std::string& what,
                      const http::Response& r) {
  json j = json::parse(r.text(), nullptr, false);
  if (j.is_discarded()) {
    return Err(InternalError(client.Name() + ": " + what + ": malformed response: not JSON"));
  }
  return j;
}

// A decoding error of the answer to `what` as a malformed response.
Status Malformed(const http::HttpClient& client, const std::string& what, const Status& s) {
  return InternalError(client.Name() + ": " + what + ": malformed response: " + s.message());
}

std::string JoinScopes(const std::vector<Scope>& scopes) {
  std::string out;
  for (Scope s : scopes) out += (out.empty() ? "" : ",") + std::string(ScopeName(s));
  return out;
}

}  // namespace

Status KeyCreate(Context& ctx, const KeyCreateArgs& args) {
  // What a person types is folded as refs are (README, "Names"): "Weights" is namespace
  // "weights", and "Pull, push" is "pull,push". The API itself takes exact values.
  auto lower = [](std::string_view in) {
    std::string out;
    for (char c : in) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  std::string scope_list = lower(args.scopes);
  std::erase_if(scope_list, [](char c) { return c == ' ' || c == '\t'; });
  const std::string ns = lower(args.ns);
  BDN_ASSIGN_OR_RETURN(std::vector<Scope> scopes, ParseScopes(scope_list));
  BDN_ASSIGN_OR_RETURN(http::HttpClient * client, Origin(ctx));
  json names = json::array();
  for (Scope s : scopes) names.push_back(std::string(ScopeName(s)));
  const std::string what = "POST /v1/keys";
  BDN_ASSIGN_OR_RETURN(
      http::Response r,
      client->PostJson("/v1/keys", json{{"namespace", ns}, {"scopes", names}}.dump()));
  BDN_ASSIGN_OR_RETURN(json j, JsonBody(*client, what, r));
  auto created = api::CreatedKeyFromJson(j);
  if (!created) return Malformed(*client, what, created.error());
  if (ctx.json) {
    json out = api::KeyToJson(created->key);
    out["token"] = created->token;
    std::printf("%s\n", JsonText(out).c_str());
  } else {
    std::printf("%s\n", created->token.c_str());
    std::fprintf(stderr,
                 "bdn: created key %s for namespace \"%s\", scopes %s; the token is shown only "
                 "once\n",
                 created->key.Name().c_str(), created->key.ns.c_str(),
                 JoinScopes(created->key.scopes).c_str());
  }
  return Status::Ok();
}

Status KeyList(Context& ctx) {
  BDN_ASSIGN_OR_RETURN(http::HttpClient * client, Origin(ctx));
  const std::string what = "GET /v1/keys";
  BDN_ASSIGN_OR_RETURN(http::Response r, client->Get("/v1/keys"));
  BDN_ASSIGN_OR_RETURN(json j, JsonBody(*client, what, r));
  if (!j.is_object() || !j.contains("keys") || !j["keys"].is_array()) {
    return InternalError(client->Name() + ": " + what + ": malformed response: keys: not a list");
  }
  std::vector<ApiKey> keys;
  for (const json& k : j["keys"]) {
    auto key = api::KeyFromJson(k);
    if (!key) return Malformed(*client, what, key.error());
    keys.push_back(std::move(*key));
  }
  if (ctx.json) {
    json list = json::array();
    for (const ApiKey& k : keys) list.push_back(api::KeyToJson(k));
    std::printf("%s\n", JsonText(json{{"keys", list}}).c_str());
    return Status::Ok();
  }
  std::printf("%-22s %-20s %-22s %-21s %s\n", "KEY", "NAMESPACE", "SCOPES", "CREATED", "STATUS");
  for (const ApiKey& k : keys) {
    std::printf("%-22s %-20s %-22s %-21s %s\n", k.Name().c_str(), k.ns.c_str(),
                JoinScopes(k.scopes).c_str(), FormatUnixMs(k.created_unix_ms).c_str(),
                k.revoked ? "revoked" : "active");
  }
  return Status::Ok();
}

Status KeyRevoke(Context& ctx, const std::string& given) {
  std::string id = given;
  if (id.starts_with("bdn_")) id.erase(0, 4);
  const size_t secret = id.find('_');
  if (secret != std::string::npos && secret > 0 &&
      id.find_first_not_of("0123456789abcdef") == secret) {
    // A whole token: its secret stays out of the message (terminal scrollback, CI logs).
    return InvalidArgumentError("that is a token, not a key id: its key id is bdn_" +
                                id.substr(0, secret) + " (the part after it is the secret)");
  }
  if (given.find('_', given.starts_with("bdn_") ? 4 : 0) != std::string::npos ||
      given.size() > 64) {
    // Perhaps a token mangled in the paste (upper case, a space before it): nothing of it shown.
    return InvalidArgumentError(
        "not a key id (it holds a second \"_\" or is over 64 characters, as a token would; "
        "nothing of it is shown): a key id is bdn_ and hex digits, such as bdn_0123456789abcdef");
  }
  if (id.empty() || id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return InvalidArgumentError("key \"" + EscapeName(given) +
                                "\": expected a key id such as bdn_0123456789abcdef");
  }
  BDN_ASSIGN_OR_RETURN(http::HttpClient * client, Origin(ctx));
  const std::string what = "DELETE /v1/keys/" + id;
  BDN_ASSIGN_OR_RETURN(http::Response r, client->Delete("/v1/keys/" + id));
  BDN_ASSIGN_OR_RETURN(json j, JsonBody(*client, what, r));
  if (ctx.json) {
    std::printf("%s\n", JsonText(j).c_str());
  } else {
    // A retry whose first answer was lost reads "already" too: either way the key is revoked.
    const auto already = j.find("already_revoked");
    std::printf(already != j.end() && *already == true
                    ? "key bdn_%s: already revoked (nothing changed)\n"
                    : "revoked key bdn_%s\n",
                j.value("id", id).c_str());
  }
  return Status::Ok();
}

}  // namespace bdn::cli
