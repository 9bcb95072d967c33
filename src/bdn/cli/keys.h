// The API-key commands, `bdn key create|ls|revoke`: calls to the keys routes of a `bdn serve`
// origin (docs/http-api.md, "Keys") over the context's HttpClient, records decoded by api/.
#pragma once

#include <string>

#include "bdn/base/status.h"
#include "bdn/cli/commands.h"

namespace bdn::cli {

struct KeyCreateArgs {
  std::string ns;      // a namespace, or "*" for all
  std::string scopes;  // comma-separated: "pull,push"
};

// bdn key create: creates a key on the origin; prints its token on stdout (with ctx.json, the
// key record and its "token" as JSON) and a line naming the key on stderr. The token is shown only
// this once. The request is sent once, never retried: the origin takes no Idempotency-Key for
// key creation, so a retry whose first answer was lost would create a second key.
// Errors: InvalidArgument for an unknown scope (before anything is sent); InvalidArgument
// "bdn key: no origin: ..." when ctx is not remote (NoOrigin); the origin's error (its code and
// message: PermissionDenied without the admin scope, FailedPrecondition on a full data disk) or
// the transport's (Unavailable, DeadlineExceeded); Internal for a malformed answer.
Status KeyCreate(Context& ctx, const KeyCreateArgs& args);

// bdn key ls: the keys the caller may manage, oldest first (never a token): a table, or with
// ctx.json {"keys": [...]}. Errors: as KeyCreate's, but for the scope.
Status KeyList(Context& ctx);

// bdn key revoke ID: revokes the key `id` ("bdn_<hex>" or "<hex>"); prints "revoked key
// bdn_<id>" (with ctx.json, the origin's answer). Errors: InvalidArgument "key \"x\": expected a
// key id such as bdn_0123abcd" (before anything is sent); otherwise as KeyList's (NotFound for an
// unknown key, FailedPrecondition for the last admin key of every namespace).
Status KeyRevoke(Context& ctx, const std::string& id);

}  // namespace bdn::cli
