// OpenRemote: a Context whose store and registry are a bdn serve origin; UnderRetryBudget;
// ReadStore.
#include "bdn/cli/commands.h"
#include "bdn/http/client.h"
#include "bdn/remote/remote_chunk_store.h"
#include "bdn/remote/remote_registry.h"

namespace bdn::cli {

Result<Context> OpenRemote(const std::string& url, const std::string& token, bool json) {
  http::ClientOptions options;
  options.base_url = url;
  options.token = token;
  options.name_server_in_rejections = true;
  auto client = http::HttpClient::Create(std::move(options));
  if (!client) return Err(client.error().WithPrefix("--remote"));
  std::shared_ptr<http::HttpClient> shared(std::move(*client));
  Context ctx;
  ctx.home = DefaultHome();
  ctx.json = json;
  ctx.origin = shared;
  ctx.token = token;
  // One client (one connection pool) serves both: its connections are created lazily and never
  // carried across the fork of a mount daemon.
  ctx.store = std::make_shared<remote::RemoteChunkStore>(shared);
  ctx.registry = std::make_shared<remote::RemoteRegistry>(shared);
  return ctx;
}

std::shared_ptr<ChunkStore> ReadStore(const Context& ctx, const PinnedRef& pinned) {
  if (!ctx.origin) return ctx.store;
  return std::make_shared<remote::RemoteChunkStore>(
      ctx.origin,
      remote::RemoteStoreOptions{.budget = ctx.retry_budget, .read_version = pinned.ToString()});
}

Context UnderRetryBudget(const Context& ctx, std::chrono::milliseconds deadline) {
  if (!ctx.origin) return ctx;
  Context out = ctx;
  out.retry_budget =
      std::make_shared<remote::RetryBudget>(remote::RetryBudget::Options{.deadline = deadline});
  out.store = std::make_shared<remote::RemoteChunkStore>(
      ctx.origin, remote::RemoteStoreOptions{.budget = out.retry_budget});
  out.registry =
      std::make_shared<remote::RemoteRegistry>(ctx.origin, remote::RetryPolicy{}, out.retry_budget);
  return out;
}

}  // namespace bdn::cli
