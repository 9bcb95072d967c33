// The object pack store's index (for docs/benchmarks.md; not yet measured at full size): how much
// opening a store of N packs costs with no local index (a listing, then one footer GET per pack)
// and with its local index tables (the listing only), what a lookup costs once open (an
// in-memory search: no request), and what finding a pack another replica just uploaded costs (a
// listing and one footer GET).
// Usage: objstore_index --endpoint URL --bucket B [--packs N] [--blobs-per-pack K] [--dir D]
// (credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; the bucket must exist and be empty).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bdn/objstore/object_pack_store.h"

namespace {

using namespace bdn;
using namespace bdn::objstore;
using Steady = std::chrono::steady_clock;

double Seconds(Steady::time_point since) {
  return std::chrono::duration<double>(Steady::now() - since).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "objstore_index: %s\n", what.c_str());
  std::exit(1);
}

std::shared_ptr<S3Client> Client(const S3Location& loc, const AwsCredentials& creds) {
  S3ClientOptions o;
  o.location = loc;
  o.credentials = creds;
  auto c = S3Client::Create(o);
  if (!c) Die(c.error().ToString());
  return std::move(*c);
}

std::shared_ptr<ObjectPackStore> Open(std::shared_ptr<S3Client> client,
                                      const std::filesystem::path& dir, uint64_t pack_bytes) {
  ObjectPackStoreOptions o;
  o.dir = dir;
  o.codec.min_saving = 1;
  o.pack_target_bytes = pack_bytes;
  o.loose_packs_per_table = 1 << 30;  // tables written below, on demand
  auto s = ObjectPackStore::Open(std::move(client), o);
  if (!s) Die(s.error().ToString());
  return std::move(*s);
}

}  // namespace

int main(int argc, char** argv) {
  S3Location loc;
  uint64_t packs = 2000, per_pack = 64;
  std::filesystem::path dir = "/tmp/bdn-objstore-index";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string f = argv[i], v = argv[i + 1];
    if (f == "--endpoint")
      loc.endpoint = v;
    else if (f == "--bucket")
      loc.bucket = v;
    else if (f == "--packs")
      packs = std::stoull(v);
    else if (f == "--blobs-per-pack")
      per_pack = std::stoull(v);
    else if (f == "--dir")
      dir = v;
    else
      Die("unknown flag " + f);
  }
  auto creds = AwsCredentialsFromEnvironment();
  if (!creds) Die(creds.error().ToString());
  std::filesystem::remove_all(dir);
  constexpr size_t kBlob = 4096;
  const uint64_t pack_bytes = per_pack * (kBlob + 64);

  // Populate: N packs of K blobs of 4 KiB, one upload each.
  std::vector<Digest> ids;
  {
    auto writer = Open(Client(loc, *creds), dir / "writer", pack_bytes);
    std::mt19937_64 rng(1);
    std::vector<uint8_t> blob(kBlob);
    const auto t = Steady::now();
    for (uint64_t i = 0; i < packs * per_pack; ++i) {
      for (auto& b : blob) b = static_cast<uint8_t>(rng());
      ids.push_back(Digest::Of(blob));
      if (Status s = writer->Put(ids.back(), blob); !s.ok()) Die(s.ToString());
    }
    if (Status s = writer->Sync(); !s.ok()) Die(s.ToString());
    std::printf("populate: %llu blobs in %llu packs, %.1f s, %llu requests\n",
                static_cast<unsigned long long>(ids.size()),
                static_cast<unsigned long long>(writer->stats().packs_uploaded), Seconds(t),
                static_cast<unsigned long long>(writer->stats().s3.requests()));
  }
  // Cold: no local index.
  auto client = Client(loc, *creds);
  auto t = Steady::now();
  auto cold = Open(client, dir / "reader", pack_bytes);
  const S3Stats c = client->stats();
  std::printf("open without a local index: %.2f s, %llu listing pages, %llu footer GETs\n",
              Seconds(t), static_cast<unsigned long long>(c.lists),
              static_cast<unsigned long long>(c.gets));
  // Lookups: batches of 64 ids (the last one shorter), as a commit check or a batch read
  // resolves them.
  t = Steady::now();
  size_t found = 0, batches = 0;
  for (size_t i = 0; i < ids.size(); i += 64, ++batches) {
    auto sizes =
        cold->Sizes(std::span<const Digest>(ids).subspan(i, std::min<size_t>(64, ids.size() - i)));
    if (!sizes) Die(sizes.error().ToString());
    for (const auto& s : *sizes) found += s.has_value();
  }
  const double lookup_s = Seconds(t);
  if (found != ids.size())
    Die("lookups found " + std::to_string(found) + " of " + std::to_string(ids.size()));
  std::printf("lookups: %zu ids in %zu batches of up to 64, %.2f us per batch, %llu requests\n",
              found, batches, lookup_s * 1e6 / static_cast<double>(batches),
              static_cast<unsigned long long>(client->stats().requests() - c.requests()));
  cold.reset();
  // Warm: the same directory, its tables written (one table for every pack read at open).
  {
    ObjectPackStoreOptions o;
    o.dir = dir / "reader";
    o.loose_packs_per_table = 1;
    auto s = ObjectPackStore::Open(client, o);
    if (!s) Die(s.error().ToString());
  }
  auto warm_client = Client(loc, *creds);
  t = Steady::now();
  auto warm = Open(warm_client, dir / "reader", pack_bytes);
  std::printf("open with its index tables: %.2f s, %llu listing pages, %llu GETs\n", Seconds(t),
              static_cast<unsigned long long>(warm_client->stats().lists),
              static_cast<unsigned long long>(warm_client->stats().gets));
  // Another replica uploads one pack; the first miss finds it.
  {
    auto other = Open(Client(loc, *creds), dir / "other", pack_bytes);
    std::vector<uint8_t> blob(kBlob, 7);
    ids.push_back(Digest::Of(blob));
    if (Status s = other->Put(ids.back(), blob); !s.ok()) Die(s.ToString());
    if (Status s = other->Sync(); !s.ok()) Die(s.ToString());
  }
  const S3Stats before = warm_client->stats();
  t = Steady::now();
  auto got = warm->Sizes(std::span<const Digest>(&ids.back(), 1));
  if (!got || !(*got)[0]) Die("the new pack was not found");
  const S3Stats after = warm_client->stats();
  std::printf(
      "a pack another replica uploaded, found on a miss: %.1f ms, %llu listing pages, %llu GETs\n",
      Seconds(t) * 1000, static_cast<unsigned long long>(after.lists - before.lists),
      static_cast<unsigned long long>(after.gets - before.gets));
  return 0;
}
