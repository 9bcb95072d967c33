// OpenRemote: a Context whose store and registry are a bdn serve origin; UnderRetryBudget;
// ReadStore.
#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "bdn/base/units.h"
#include "bdn/cli/commands.h"
#include "bdn/http/client.h"
#include "bdn/remote/remote_chunk_store.h"
#include "bdn/remote/remote_registry.h"

namespace bdn::cli {
namespace {

// The registry of `origin` for a CLI whose home is `home`: a push re-run after its process died
// takes the dead process's claim over at once (remote/claim_journal.h).
std::shared_ptr<Registry> RemoteRegistryOf(std::shared_ptr<http::HttpClient> origin,
                                           const std::filesystem::path& home,
                                           std::shared_ptr<remote::RetryBudget> budget = nullptr) {
  auto registry = std::make_shared<remote::RemoteRegistry>(std::move(origin), remote::RetryPolicy{},
                                                           std::move(budget));
  registry->SetClaimJournal(std::make_shared<remote::ClaimJournal>(home / "push-claims"));
  return registry;
}

}  // namespace

std::string TokenFromEnvironment() {
  const char* given = std::getenv("BDN_TOKEN");
  std::string_view token = given ? given : "";
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t first = token.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return "";
  return std::string(token.substr(first, token.find_last_not_of(kSpace) - first + 1));
}

Result<Context> OpenRemote(const std::string& url, const std::string& token, bool json,
                           const std::filesystem::path& home, std::optional<std::string> session,
                           const std::string& named_by) {
  if (Status s = http::CheckBearerToken(token); !s.ok()) return Err(s.WithPrefix("BDN_TOKEN"));
  http::ClientOptions options;
  options.base_url = url;
  options.token = token;
  options.name_server_in_rejections = true;
  if (!session) {
    BDN_ASSIGN_OR_RETURN(session, RandomHex(16));
  }
  if (session->size() > 128 || std::ranges::any_of(*session, [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f;
      })) {
    return Err(InvalidArgumentError(
        "BDN_SESSION: must be at most 128 visible ASCII characters (no space, control character "
        "or other byte)"));
  }
  if (!session->empty()) options.headers.emplace_back("Bdn-Session", *session);
  auto client = http::HttpClient::Create(std::move(options));
  if (!client) return Err(client.error().WithPrefix(named_by));
  std::shared_ptr<http::HttpClient> shared(std::move(*client));
  Context ctx;
  ctx.home = home;
  ctx.json = json;
  ctx.origin = shared;
  ctx.token = token;
  // One client (one connection pool) serves both: its connections are created lazily and never
  // carried across the fork of a mount daemon.
  ctx.store = std::make_shared<remote::RemoteChunkStore>(shared);
  ctx.registry = RemoteRegistryOf(shared, ctx.home);
  return ctx;
}

std::shared_ptr<ChunkStore> ReadStore(const Context& ctx, const PinnedRef& pinned) {
  if (!ctx.origin) return ctx.store;
  return std::make_shared<remote::RemoteChunkStore>(
      ctx.origin,
      remote::RemoteStoreOptions{.budget = ctx.retry_budget, .read_version = pinned.ToString()});
}

Context UnderRetryBudget(const Context& ctx, std::chrono::milliseconds deadline,
                         const std::string& flag) {
  if (!ctx.origin) return ctx;
  Context out = ctx;
  out.retry_budget = std::make_shared<remote::RetryBudget>(
      remote::RetryBudget::Options{.deadline = deadline, .flag = flag});
  out.store = std::make_shared<remote::RemoteChunkStore>(
      ctx.origin, remote::RemoteStoreOptions{.budget = out.retry_budget});
  out.registry = RemoteRegistryOf(ctx.origin, ctx.home, out.retry_budget);
  return out;
}

}  // namespace bdn::cli
