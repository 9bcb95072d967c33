#include "bdn/origin/upstream_chain.h"

#include <nlohmann/json.hpp>

#include "bdn/base/units.h"
#include "bdn/http/errors.h"

namespace bdn::origin {
namespace {

using json = nlohmann::json;

constexpr std::string_view kIdPrefix = "cache-";
constexpr size_t kIdHexDigits = 12;

bool IsNodeId(std::string_view id) {
  if (id.size() != kIdPrefix.size() + kIdHexDigits || !id.starts_with(kIdPrefix)) return false;
  for (char c : id.substr(kIdPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string Joined(const std::vector<std::string>& ids, std::string_view sep) {
  std::string out;
  for (const auto& id : ids) {
    if (!out.empty()) out += sep;
    out += id;
  }
  return out;
}

Status LoopError(std::string message) {
  return FailedPreconditionError(std::move(message)).WithReason(std::string(kLoopDetected));
}

// The chain of a 200 answer: {"chain": [ids]}. Errors: Internal naming what is wrong.
Result<std::vector<std::string>> ChainOfAnswer(std::string_view body) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("chain") || !doc["chain"].is_array() ||
      doc["chain"].size() > kMaxChainNodes) {
    return Err(InternalError("chain: the answer is not {\"chain\": [at most 16 node ids]}"));
  }
  std::vector<std::string> ids;
  for (const auto& v : doc["chain"]) {
    if (!v.is_string() || !IsNodeId(v.get<std::string>())) {
      return Err(InternalError("chain: the answer holds something that is not a cache node id"));
    }
    ids.push_back(v.get<std::string>());
  }
  return ids;
}

}  // namespace

Result<std::string> NewNodeId() {
  BDN_ASSIGN_OR_RETURN(std::string hex, RandomHex(kIdHexDigits / 2));
  return std::string(kIdPrefix) + hex;
}

Result<std::vector<std::string>> ParseChain(std::string_view header) {
  std::vector<std::string> ids;
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!IsNodeId(item)) {
      // At most the first 64 bytes of a bad item are echoed.
      return Err(InvalidArgumentError(std::string(kChainHeader) + ": \"" +
                                      std::string(item.substr(0, 64)) +
                                      "\" is not a cache node id (cache-<12 hex digits>)"));
    }
    ids.emplace_back(item);
    if (ids.size() > kMaxChainNodes) break;  // the caller refuses it; parse no further
  }
  return ids;
}

void AnswerChainAtOrigin(http::ServerResponse& res) {
  http::SetJson(res, json{{"chain", json::array()}}.dump());
}

void AnswerChainAtCacheNode(std::string_view header, const std::string& self,
                            http::HttpClient& upstream, http::ServerResponse& res) {
  auto via = ParseChain(header);
  if (!via) {
    http::SetError(res, via.error());
    return;
  }
  const std::string me = "cache node " + self;
  for (const auto& id : *via) {
    if (id != self) continue;
    via->push_back(self);
    http::SetError(res,
                   LoopError(me + ": a request came back to it through " + Joined(*via, " -> ") +
                             ": its --upstream leads back to it"),
                   508);
    return;
  }
  if (via->size() >= kMaxChainNodes) {
    via->resize(kMaxChainNodes);
    http::SetError(
        res,
        LoopError(me + ": a request passed " + std::to_string(kMaxChainNodes) + " cache nodes (" +
                  Joined(*via, " -> ") + "); a chain that long is taken for a loop"),
        508);
    return;
  }
  via->push_back(self);
  http::Request req{.method = http::Method::kGet, .path = "/v1/chain"};
  req.headers.emplace_back(kChainHeader, Joined(*via, ", "));
  auto r = upstream.Send(req);
  if (r && r->status == 508) {
    res.status = 508;
    res.set_content(std::string(r->text()), "application/json");
    return;
  }
  Result<std::vector<std::string>> chain =
      !r                 ? Result<std::vector<std::string>>(Err(r.error()))
      : r->status != 200 ? Result<std::vector<std::string>>(Err(upstream.ErrorOf(req, *r)))
                         : ChainOfAnswer(r->text());
  if (!chain) {
    // The upstream's own message may name its address; only its code and reason are passed.
    http::SetError(res,
                   UnavailableError(me + ": its upstream did not answer the chain check (" +
                                    http::ErrorCodeName(chain.error().code()) + ")"),
                   502);
    return;
  }
  chain->insert(chain->begin(), self);
  http::SetJson(res, json{{"chain", *chain}}.dump());
}

Result<std::vector<std::string>> ProbeUpstreamChain(http::HttpClient& upstream,
                                                    const std::string& self) {
  http::Request req{.method = http::Method::kGet, .path = "/v1/chain"};
  req.headers.emplace_back(kChainHeader, self);
  BDN_ASSIGN_OR_RETURN(http::Response r, upstream.Send(req));
  if (r.status == 508) {
    Status s = http::StatusFromErrorBody(r.status, r.text());
    return Err(LoopError(std::string(s.message())));
  }
  if (r.status != 200) return Err(upstream.ErrorOf(req, r));
  return ChainOfAnswer(r.text());
}

}  // namespace bdn::origin
