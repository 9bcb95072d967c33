// Writes the seed corpus of every fuzz target (fuzz/corpus/<target>/seed-*): valid inputs made by
// the project's own encoders, plus edge cases. Run by `scripts/fuzz.sh --seeds`; the output is
// committed. Usage: make_seeds CORPUS_DIR
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bdn/format/chunk_index.h"
#include "bdn/format/manifest.h"
#include "bdn/store/pack_file.h"

namespace {

using namespace bdn;
namespace fs = std::filesystem;

fs::path g_root;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::path dir = g_root / target;
  fs::create_directories(dir);
  std::ofstream(dir / ("seed-" + name), std::ios::binary) << bytes;
}

std::string Raw(const Digest& d) {
  return {reinterpret_cast<const char*>(d.data()), Digest::kSize};
}

std::string Le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

Entry MakeEntry(EntryKind kind, std::string path) {
  Entry e;
  e.kind = kind;
  e.path = std::move(path);
  e.mode = kind == EntryKind::kDirectory ? 0755 : 0644;
  return e;
}

Entry File(std::string path, std::string_view content) {
  Entry e = MakeEntry(EntryKind::kFile, std::move(path));
  e.size_bytes = content.size();
  e.digest = Digest::Of(content);
  e.layout = content.empty() ? FileLayout::kEmpty : FileLayout::kSingleChunk;
  return e;
}

std::string Encode(const Manifest& m) {
  auto bytes = EncodeManifest(m);
  if (!bytes) {
    std::fprintf(stderr, "make_seeds: %s\n", bytes.error().ToString().c_str());
    std::exit(1);
  }
  return *bytes;
}

// A pack written by PackWriter into memory: `blobs` raw, compressed where zstd saves 10 %;
// `seal` adds the footer.
std::string Pack(const std::vector<std::string>& blobs, bool seal) {
  int fd = ::memfd_create("seed", MFD_CLOEXEC);
  auto w = pack::PackWriter::Start(fd, "seed");
  if (!w) std::exit(1);
  for (const std::string& b : blobs) {
    std::span<const uint8_t> raw(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    pack::EncodedBlob e = pack::EncodeBlob(raw, {});
    if (!w->Append(Digest::Of(b), b.size(), e.codec,
                   e.codec == pack::Codec::kNone ? raw : e.stored))
      std::exit(1);
  }
  if (seal && !w->Seal().ok()) std::exit(1);
  std::string out(w->bytes(), '\0');
  if (::pread(fd, out.data(), out.size(), 0) != static_cast<ssize_t>(out.size())) std::exit(1);
  ::close(fd);
  return out;
}

void PackSeeds() {
  const std::vector<std::string> blobs = {"", "hello", std::string(300, 'z'),
                                          "incompressible 0123456789abcdef"};
  const std::string sealed = Pack(blobs, true);
  Write("pack", "sealed", sealed);
  Write("pack", "unsealed", Pack(blobs, false));
  Write("pack", "empty-sealed", Pack({}, true));
  Write("pack", "torn-footer", sealed.substr(0, sealed.size() - 10));
  std::string flipped = sealed;
  flipped[100] = static_cast<char>(flipped[100] ^ 1);
  Write("pack", "flipped", flipped);
}

void ManifestSeeds() {
  Manifest empty;
  Write("manifest", "empty", Encode(empty));

  Manifest m;
  m.entries.push_back(MakeEntry(EntryKind::kDirectory, "a"));
  m.entries.push_back(File("a/b", "hello"));
  Entry indexed = File("a/c", "");
  indexed.size_bytes = 300'000;
  indexed.layout = FileLayout::kIndexed;
  indexed.digest = Digest::Of(std::string_view("whole file"));
  indexed.index = Digest::Of(std::string_view("chunk index"));
  m.entries.push_back(indexed);
  m.entries.push_back(MakeEntry(EntryKind::kDirectory, "a/d"));
  m.entries.push_back(File("e", ""));
  Entry hard = MakeEntry(EntryKind::kHardlink, "h");
  hard.target = "a/b";
  m.entries.push_back(hard);
  Entry sym = MakeEntry(EntryKind::kSymlink, "l");
  sym.mode = 0777;
  sym.target = "../outside/ü";
  m.entries.push_back(sym);
  Write("manifest", "tree", Encode(m));

  // A file of more than 1,024 chunks: its index is a version-2 object (a list of pieces); the
  // manifest entry has the same fields either way.
  Manifest large;
  Entry big = File("model.safetensors", "");
  big.size_bytes = 1ull << 30;
  big.layout = FileLayout::kIndexed;
  big.digest = Digest::Of(std::string_view("1 GiB of weights"));
  big.index = Digest::Of(std::string_view("version-2 chunk index"));
  large.entries.push_back(big);
  Write("manifest", "indexed-large", Encode(large));

  Manifest timed = m;
  timed.has_mtimes = true;
  int64_t t = -1;
  for (Entry& e : timed.entries) e.mtime_ns = t++ * 1'000'000'007;
  Write("manifest", "tree-mtimes", Encode(timed));

  Manifest params;
  params.chunker = {64, 256, 16 * 1024 * 1024};
  params.entries.push_back(File("x", std::string(100, 'x')));
  Write("manifest", "chunker-params", Encode(params));

  std::string tree = Encode(m);
  Write("manifest", "truncated", tree.substr(0, tree.size() - 1));
  Write("manifest", "trailing", tree + "x");
  Write("manifest", "bad-magic", "BDNX" + tree.substr(4));
}

// u64 file size | u16 root length | root | (u16 length | piece)... as chunk_index_fuzz.cc reads
// it (pieces are fetched in the order listed).
std::string IndexInput(uint64_t file_size, const std::string& root,
                       const std::vector<std::string>& pieces = {}) {
  std::string in = Le(file_size, 8) + Le(root.size(), 2) + root;
  for (const std::string& p : pieces) in += Le(p.size(), 2) + p;
  return in;
}

void ChunkIndexSeeds() {
  Write("chunk_index", "empty", IndexInput(0, EncodeChunkIndex({})));
  std::vector<ChunkRef> chunks;
  for (uint32_t i = 1; i <= 3; ++i) {
    chunks.push_back({Digest::Of(std::to_string(i)), i * 300});
  }
  std::string three = EncodeChunkIndex(chunks);
  Write("chunk_index", "three", IndexInput(1800, three));
  Write("chunk_index", "short", IndexInput(1800, three.substr(0, three.size() - 4)));
  std::vector<ChunkRef> empty_chunk = chunks;
  empty_chunk[1].size_bytes = 0;
  Write("chunk_index", "empty-chunk", IndexInput(1500, EncodeChunkIndex(empty_chunk)));

  // Version 2: two pieces, as EncodeFileIndex writes them (cut by hand: the rule needs > 1024
  // chunks, more than a short seed holds).
  auto piece = [](std::span<const ChunkRef> run) {
    uint64_t bytes = 0;
    for (const ChunkRef& c : run) bytes += c.size_bytes;
    std::string blob = EncodeChunkIndex(run);
    return std::make_pair(ChunkIndexPiece{Digest::Of(blob), run.size(), bytes}, blob);
  };
  std::vector<ChunkRef> more = chunks;
  more.push_back({Digest::Of(std::string_view("4")), 1024});
  more.push_back({Digest::Of(std::string_view("5")), 1});
  auto [p1, b1] = piece(std::span<const ChunkRef>(more).subspan(0, 3));
  auto [p2, b2] = piece(std::span<const ChunkRef>(more).subspan(3));
  using Table = std::vector<ChunkIndexPiece>;
  const uint64_t total = p1.size_bytes + p2.size_bytes;
  const std::string table = EncodePieceTable(Table{p1, p2});
  Write("chunk_index", "v2-two-pieces", IndexInput(total, table, {b1, b2}));
  Write(
      "chunk_index", "v2-repeated-piece",
      IndexInput(2 * p1.size_bytes + p2.size_bytes, EncodePieceTable(Table{p1, p2, p1}), {b1, b2}));
  Write("chunk_index", "v2-missing-piece", IndexInput(total, table, {b1}));
  ChunkIndexPiece wrong = p2;
  wrong.chunk_count = 1;
  Write("chunk_index", "v2-wrong-count",
        IndexInput(total, EncodePieceTable(Table{p1, wrong}), {b1, b2}));
  const std::string nested = EncodePieceTable(Table{p1});
  const ChunkIndexPiece nested_piece{Digest::Of(nested), 3, p1.size_bytes};
  Write("chunk_index", "v2-nested",
        IndexInput(total, EncodePieceTable(Table{nested_piece, p2}), {nested, b2}));
  Write("chunk_index", "v2-truncated",
        IndexInput(total, table.substr(0, table.size() - 8), {b1, b2}));
}

// [n ids][piece size][ids][body] as batch_response_fuzz.cc reads it.
void BatchSeed(const std::string& name, const std::vector<Digest>& ids, uint8_t piece,
               const std::string& body) {
  std::string in;
  in += static_cast<char>(ids.size());
  in += static_cast<char>(piece);
  for (const Digest& d : ids) in += Raw(d);
  Write("batch_response", name, in + body);
}

std::string Record(const Digest& id, uint8_t status, const std::string& bytes) {
  return Raw(id) + static_cast<char>(status) + Le(bytes.size(), 4) + bytes;
}

void BatchSeeds() {
  const std::string a = "first chunk", b(700, 'b');
  const Digest ida = Digest::Of(a), idb = Digest::Of(b), idm = Digest::Of(std::string_view("m"));
  const Digest ide = Digest::Of(std::string_view());
  BatchSeed("no-ids", {}, 1, "BDNB");
  BatchSeed("one", {ida}, 7, "BDNB" + Record(ida, 0, a));
  BatchSeed("found-missing-found", {ida, idm, idb}, 64,
            "BDNB" + Record(ida, 0, a) + Record(idm, 1, "") + Record(idb, 0, b));
  BatchSeed("empty-blob", {ide, ide}, 3, "BDNB" + Record(ide, 0, "") + Record(ide, 0, ""));
  BatchSeed("truncated", {ida, idb}, 5,
            "BDNB" + Record(ida, 0, a) + Record(idb, 0, b).substr(0, 50));
  BatchSeed("out-of-order", {ida, idb}, 2, "BDNB" + Record(idb, 0, b) + Record(ida, 0, a));
  BatchSeed("missing-with-length", {idm}, 1, "BDNB" + Raw(idm) + '\1' + Le(5, 4) + "xxxxx");
}

// Seeds NAME-0, NAME-1, ... of `target`, each `prefix` + a text.
void TextSeeds(const std::string& target, const std::string& name,
               const std::vector<std::string>& texts, const std::string& prefix = "") {
  for (size_t i = 0; i < texts.size(); ++i) {
    Write(target, name + "-" + std::to_string(i), prefix + texts[i]);
  }
}

void RangeSeeds() {
  struct Case {
    uint64_t size;
    const char* value;
  } cases[] = {{100, "bytes=0-99"}, {100, "bytes=5-"},
               {100, "bytes=-10"},  {100, "bytes=90-200"},
               {0, "bytes=0-"},     {100, "bytes=0-0,5-6"},
               {7, "bytes= 1-2 "},  {UINT64_MAX, "bytes=18446744073709551614-"},
               {100, "bytes=-0"},   {1, "bytes=-18446744073709551615"}};
  int i = 0;
  for (const Case& c : cases)
    Write("range", "range-" + std::to_string(i++), Le(c.size, 8) + c.value);
}

void MountsSeeds() {
  TextSeeds(
      "mounts_config", "config",
      {"bdn:\n  mounts:\n    - source: bdn:weights/qwen3-8b@b3:9f3c1a2b4c5d\n"
       "      path: /mnt/weights/qwen3-8b\n"
       "    - source: bdn:weights/tokenizers:prod   # a tag\n      path: /mnt/tok\n",
       "other: 1\nbdn: {mounts: [{source: 'bdn:a/b:x', path: \"/m/a\"}, "
       "{path: /m/b/, source: \"bdn:a/c\"}]}\n",
       "bdn:\n  mounts: []\n",
       "x: &s bdn:w/v:prod\nbdn:\n  mounts:\n  - source: *s\n    path: /a/./b\n",
       "bdn:\n  mounts:\n  - source: bdn:w/v\n    path: /m\n  - source: bdn:w/v\n    path: /m/n\n",
       "bdn:\n  mounts:\n  - source: bdn:w/v\n    source: bdn:w/x\n    path: /m\n",
       "bdn:\r\n  mounts:\r\n  - {source: bdn:w/v, path: /m}\r\n",
       "bdn:\n  mounts:\n  - source: \"bdn:w/v:t\"\n    path: /\n  - ? [a]\n    : b\n",
       "bdn:\n  mounts:\n  - source: bdn:w/v\n    path: /m\n    allow_other: yes\n"});
}

void JsonSeeds() {
  const std::string hex = Digest::Of(std::string_view("x")).Hex();
  TextSeeds(
      "json_bodies", "body",
      {"{\"ids\": [\"" + hex + "\", \"b3:" + hex + "\"]}",
       "{\"digest\": \"" + hex +
           "\", \"stats\": {\"files\": 1, \"bytes\": 5, \"chunks\": 1, "
           "\"entries\": 2}, \"source_uri\": \"file:///m\", \"tags\": [\"prod\"], "
           "\"expected_sequence\": 3, \"claim\": \"c1\"}",
       "{\"namespace\": \"w\", \"volume\": \"v\", \"digest\": \"" + hex +
           "\", \"sequence\": 2, "
           "\"lifecycle\": \"DELETED\", \"created_unix_ms\": 1, \"deleted_unix_ms\": 2, "
           "\"delete_after_unix_ms\": null, \"stats\": {\"files\": 0, \"bytes\": 0, \"chunks\": 0, "
           "\"entries\": 0}, \"source_uri\": \"\", \"tags\": [], \"is_head\": true}",
       "{\"namespace\": \"w\", \"volume\": \"v\", \"head\": \"" + hex +
           "\", \"sequence\": 9, "
           "\"tags\": {\"prod\": \"" +
           hex +
           "\"}, \"live_versions\": 1, \"deleted_versions\": 0, "
           "\"created_unix_ms\": 1700000000000}",
       "{\"sequence\": 4, \"unchanged\": false, \"head_updated\": true, \"tags_applied\": [\"a\"]}",
       "{\"error\": {\"code\": \"not_found\", \"message\": \"chunk b3:00: not in store\"}}",
       "{\"ids\": [], \"sequence\": -9223372036854775808, \"expected_sequence\": 1e3}",
       "[1, {\"a\": null}]",
       "{\"id\": \"sync_0123abcd\", \"state\": \"READY\", \"source\": \"hf://a/b@main\", "
       "\"namespace\": \"w\", \"volume\": \"v\", \"tag\": \"prod\", \"dest\": \"bdn:w/v:prod\", "
       "\"includes\": [\"*.json\"], \"excludes\": [], \"auth_secret_name\": \"hf\", "
       "\"retry_deadline_ms\": 300000, \"cancel_requested\": false, \"source_revision\": "
       "\"abc\", \"listing_digest\": \"b3:" +
           hex +
           "\", \"progress\": {\"objects_total\": 2, "
           "\"objects_done\": 2, \"bytes_total\": 10, \"bytes_done\": 10, \"bytes_fetched\": 10}, "
           "\"version\": \"b3:" +
           hex + "\", \"version_ref\": \"bdn:w/v@b3:" + hex +
           "\", "
           "\"unchanged\": false, \"error\": null, \"created_unix_ms\": 1, \"updated_unix_ms\": 2, "
           "\"started_unix_ms\": 1, \"finished_unix_ms\": 2, \"runs\": 1}",
       "{\"id\": \"sync_1\", \"state\": \"FAILED\", \"source\": \"file:///m\", "
       "\"namespace\": \"w\", \"volume\": \"v\", \"error\": {\"code\": \"source_not_found\", "
       "\"message\": \"404\"}, \"progress\": {}}",
       "{\"name\": \"hf\", \"created_unix_ms\": 1, \"updated_unix_ms\": 2}"});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
    return 2;
  }
  g_root = argv[1];
  ManifestSeeds();
  PackSeeds();
  ChunkIndexSeeds();
  BatchSeeds();
  RangeSeeds();
  MountsSeeds();
  JsonSeeds();
  const std::string hex = Digest::Of(std::string_view("x")).Hex();
  TextSeeds("ref", "volume",
            {"bdn:weights/qwen3-8b", "bdn:weights/qwen3-8b:prod", "bdn:w/v@b3:" + hex,
             "bdn:w/v@9F3C1A2B4C5D/tokenizer/config.json", "bdn:W/V:Tag_1.x/a/b", "weights/x",
             "bdn:w/v:prod@abc", "bdn:w/v/a/../b"},
            std::string(1, '\0'));
  TextSeeds("ref", "namespace", {"bdn:weights", "bdn:weights/"}, std::string(1, '\1'));
  Write("ref", "ns-with-tag", "\1bdn:w:t");
  TextSeeds("listen_address", "address",
            {":8440", "0.0.0.0:8440", "[::1]:0", "localhost:65535", "host:65536", "::1:80", "[]:80",
             "h:+1", "h:"});
  TextSeeds("node_list", "list",
            {"http://a:1,http://b:2", " http://a , ,http://b\t", "", ",,,", "http://only"});
  TextSeeds("units", "size", {"64KiB", "1.5G", "18446744073709551615", "16777216T", ".5k", "1.2.3"},
            std::string(1, '\1'));
  TextSeeds("units", "duration", {"30s", "500ms", "1.5m", "24h", "0.0015s", "999999999999999h"},
            std::string(1, '\0'));
  Write("units", "bounded",
        "\x02"
        "100ms");
  // listings: the decoder byte (0 S3, 1 Azure, 2 <Error>, 3 DeleteResult), then XML as the
  // stores send it.
  TextSeeds(
      "listings", "s3",
      {"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3."
       "amazonaws.com/doc/2006-03-01/\"><Name>b</Name><Prefix>m/</Prefix><KeyCount>2</KeyCount>"
       "<IsTruncated>true</IsTruncated><NextContinuationToken>1ue/X+Y=</NextContinuationToken>"
       "<Contents><Key>m/a b+c%d#e?f</Key><ETag>&quot;9b2c&quot;</ETag><Size>12</Size>"
       "</Contents><Contents><Key>m/\xe6\x97\xa5</Key><Size>0</Size></Contents>"
       "</ListBucketResult>",
       "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>",
       "<!DOCTYPE x [<!ENTITY a \"b\">]><ListBucketResult>&a;</ListBucketResult>"},
      std::string(1, '\0'));
  TextSeeds("listings", "azure",
            {"<EnumerationResults ContainerName=\"c\"><Blobs><Blob><Name>p/a b</Name><Properties>"
             "<Etag>0x8DB</Etag><Content-Length>42</Content-Length></Properties></Blob><Blob>"
             "<Name Encoded=\"true\">p/%EF%BF%BE</Name><Properties><Content-Length>1"
             "</Content-Length><ResourceType>directory</ResourceType></Properties></Blob></Blobs>"
             "<NextMarker>2!72!MDAw</NextMarker></EnumerationResults>"},
            std::string(1, '\1'));
  TextSeeds(
      "listings", "error",
      {"<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>gone</Message></Error>"},
      std::string(1, '\2'));
  TextSeeds("listings", "delete",
            {"<?xml version=\"1.0\"?><DeleteResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/"
             "\"><Deleted><Key>p/a</Key></Deleted><Error><Key>p/b&amp;c</Key><Code>AccessDenied"
             "</Code><Message>Access Denied</Message></Error></DeleteResult>"},
            std::string(1, '\3'));
  return 0;
}
