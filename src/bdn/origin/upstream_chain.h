// Loop detection for chains of cache nodes (docs/http-api.md, "GET /v1/chain"). A cache node's
// --upstream may be another cache node; one pointed, directly or through others, back at itself
// would pass every miss and every access check around the loop until the callers' deadlines.
// So each cache node has a random node id, and GET /v1/chain walks the chain: a cache node
// answers with its own id followed by its upstream's answer, to which it forwards the request
// with its id appended to the Bdn-Chain header; a node that finds its own id in that header
// answers 508 "loop_detected"; the origin ends the chain. A cache node walks its chain once it
// listens (ProbeUpstreamChain) and refuses to run on a loop.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bdn/base/status.h"
#include "bdn/http/client.h"
#include "bdn/http/message.h"

namespace bdn::origin {

// The request header holding the ids of the cache nodes a chain request has passed, in order,
// comma-separated.
inline constexpr std::string_view kChainHeader = "Bdn-Chain";
// A chain request that has passed this many cache nodes is refused (508): no real deployment
// stacks that many.
inline constexpr size_t kMaxChainNodes = 16;
// Status::reason of a chain that loops or is too long (HTTP 508).
inline constexpr std::string_view kLoopDetected = "loop_detected";

// A fresh cache node id: "cache-" and 12 random lower-case hex digits. Errors: those of
// RandomHex.
Result<std::string> NewNodeId();

// The ids of a Bdn-Chain header value ("cache-a, cache-b"; empty: none). Errors:
// InvalidArgument "Bdn-Chain: \"x\" is not a cache node id (cache-<12 hex digits>)".
Result<std::vector<std::string>> ParseChain(std::string_view header);

// The origin's answer to GET /v1/chain: 200 {"chain": []}.
void AnswerChainAtOrigin(http::ServerResponse& res);

// A cache node's answer to GET /v1/chain, whose request carried `header` (Bdn-Chain, may be
// empty): 400 for a malformed header; 508 (reason loop_detected) "cache node <self>: a request
// came back to it through <a> -> <b> -> <self>: its --upstream leads back to it" when `self` is
// in it, or "cache node <self>: a request passed 16 cache nodes (<a> -> ...); a chain that long
// is taken for a loop" when it is full; otherwise the upstream's answer to the request forwarded
// with `self` appended: 200 {"chain": [self, <upstream's chain>...]}, its 508 as it is, and 502
// "cache node <self>: its upstream did not answer the chain check: <reason>" for anything else
// (the upstream's address is not named: callers need not know it).
void AnswerChainAtCacheNode(std::string_view header, const std::string& self,
                            http::HttpClient& upstream, http::ServerResponse& res);

// For a cache node that has started listening: walks the chain from its upstream with
// Bdn-Chain: <self> and returns the ids of the cache nodes between it and the origin (empty when
// the upstream is the origin). Errors: FailedPrecondition (reason loop_detected) with the
// message of the node that found the loop, when the chain leads back here or is too long;
// otherwise the transport or HTTP error (Unavailable when the upstream is down, NotFound when
// it predates /v1/chain), which a caller may take as "cannot tell" and go on.
Result<std::vector<std::string>> ProbeUpstreamChain(http::HttpClient& upstream,
                                                    const std::string& self);

}  // namespace bdn::origin
