// Fuzzes the object-store listing decoders (objstore/xml_listing.h). Input: one byte that picks
// the decoder (S3 ListObjectsV2 page, Azure List Blobs page, <Error> body, DeleteObjects
// DeleteResult), then the XML. A decoder
// either fails with InvalidArgument, or gives a page whose every entry has a non-empty key (and,
// for S3, a token whenever the page is truncated); that page written back as XML (text escaped,
// Azure names percent-encoded with Encoded="true") decodes to the same entries.
#include <string>

#include "bdn/base/text.h"
#include "bdn/objstore/xml_listing.h"
#include "fuzz_check.h"

namespace {

bool Same(const std::vector<bdn::objstore::ListedObject>& a,
          const std::vector<bdn::objstore::ListedObject>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].key != b[i].key || a[i].size_bytes != b[i].size_bytes || a[i].etag != b[i].etag) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bdn;
  using namespace bdn::objstore;
  if (size < 1) return 0;
  const std::string_view xml = fuzz::Text(data + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto page = ParseS3ListPage(xml);
      if (!page) {
        FUZZ_CHECK(page.error().code() == StatusCode::kInvalidArgument, page.error().ToString());
        return 0;
      }
      FUZZ_CHECK(!page->truncated || !page->next_token.empty(), "truncated without a token");
      std::string again = "<ListBucketResult><IsTruncated>" +
                          std::string(page->truncated ? "true" : "false") + "</IsTruncated>";
      if (page->truncated) {
        again +=
            "<NextContinuationToken>" + XmlEscape(page->next_token) + "</NextContinuationToken>";
      }
      for (const ListedObject& o : page->objects) {
        FUZZ_CHECK(!o.key.empty(), "an empty key");
        again += "<Contents><Key>" + XmlEscape(o.key) + "</Key><Size>" +
                 std::to_string(o.size_bytes) + "</Size>" +
                 (o.etag.empty() ? "" : "<ETag>" + XmlEscape(o.etag) + "</ETag>") + "</Contents>";
      }
      again += "</ListBucketResult>";
      auto back = ParseS3ListPage(again);
      FUZZ_CHECK(back && Same(back->objects, page->objects) && back->truncated == page->truncated &&
                     back->next_token == page->next_token,
                 again);
      return 0;
    }
    case 1: {
      auto page = ParseAzureListPage(xml);
      if (!page) {
        FUZZ_CHECK(page.error().code() == StatusCode::kInvalidArgument, page.error().ToString());
        return 0;
      }
      std::string again = "<EnumerationResults><Blobs>";
      for (const ListedObject& o : page->blobs) {
        FUZZ_CHECK(!o.key.empty(), "an empty name");
        again += "<Blob><Name Encoded=\"true\">" + PercentEncode(o.key) +
                 "</Name><Properties><Content-Length>" + std::to_string(o.size_bytes) +
                 "</Content-Length>" +
                 (o.etag.empty() ? "" : "<Etag>" + XmlEscape(o.etag) + "</Etag>") +
                 "</Properties></Blob>";
      }
      again += "</Blobs><NextMarker>" + XmlEscape(page->next_marker) +
               "</NextMarker></EnumerationResults>";
      auto back = ParseAzureListPage(again);
      FUZZ_CHECK(back && Same(back->blobs, page->blobs) && back->next_marker == page->next_marker,
                 again);
      return 0;
    }
    case 3: {
      auto failures = ParseDeleteResult(xml);
      if (!failures) {
        FUZZ_CHECK(failures.error().code() == StatusCode::kInvalidArgument,
                   failures.error().ToString());
        return 0;
      }
      std::string again = "<DeleteResult>";
      for (const DeleteFailure& f : *failures) {
        again += "<Error><Key>" + XmlEscape(f.key) + "</Key><Code>" + XmlEscape(f.code) +
                 "</Code><Message>" + XmlEscape(f.message) + "</Message></Error>";
      }
      again += "</DeleteResult>";
      auto back = ParseDeleteResult(again);
      bool same = back && back->size() == failures->size();
      for (size_t i = 0; same && i < back->size(); ++i) {
        same = (*back)[i].key == (*failures)[i].key && (*back)[i].code == (*failures)[i].code &&
               (*back)[i].message == (*failures)[i].message;
      }
      FUZZ_CHECK(same, again);
      return 0;
    }
    default: {
      auto e = ParseStoreError(xml);
      if (e) FUZZ_CHECK(!e->code.empty(), "an error without a code");
      return 0;
    }
  }
}
