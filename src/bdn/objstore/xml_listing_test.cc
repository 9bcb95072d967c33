// The listing decoders against well-formed pages (as S3, s3rver and Azure send them) and hostile
// ones: truncated, lying, huge, deeply nested, with entity declarations.
#include "bdn/objstore/xml_listing.h"

#include <gtest/gtest.h>

#include "bdn/testing/status_matchers.h"

namespace bdn::objstore {
namespace {

constexpr char kS3Page[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>models/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <Contents><Key>models/a b+c%d#e?f.bin</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>1234</Size>
    <StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>models/日本/é.json</Key><ETag>"d41d8cd98f00b204e9800998ecf8427e"</ETag><Size>0</Size></Contents>
  <Contents><Key>models/big</Key><Size>9223372036854775807</Size></Contents>
</ListBucketResult>)";

TEST(ParseS3ListPage, ReadsKeysSizesEtagsAndTheToken) {
  auto page = ParseS3ListPage(kS3Page);
  ASSERT_OK(page);
  ASSERT_EQ(3u, page->objects.size());
  EXPECT_EQ("models/a b+c%d#e?f.bin", page->objects[0].key);
  EXPECT_EQ(1234u, page->objects[0].size_bytes);
  EXPECT_EQ("\"9b2cf535f27731c974343645a3985328\"", page->objects[0].etag);
  EXPECT_EQ("models/日本/é.json", page->objects[1].key);
  EXPECT_EQ(0u, page->objects[1].size_bytes);
  EXPECT_EQ(9223372036854775807u, page->objects[2].size_bytes);
  EXPECT_EQ("", page->objects[2].etag);
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ("1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=", page->next_token);
}

TEST(ParseS3ListPage, TheLastPageAndAnEmptyOne) {
  auto page = ParseS3ListPage(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key>k</Key><Size>1</Size></Contents></ListBucketResult>");
  ASSERT_OK(page);
  EXPECT_FALSE(page->truncated);
  EXPECT_EQ(1u, page->objects.size());
  auto empty = ParseS3ListPage("<ListBucketResult><KeyCount>0</KeyCount></ListBucketResult>");
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->objects.empty());
  EXPECT_FALSE(empty->truncated);
}

TEST(ParseS3ListPage, RefusesBadPagesNamingWhatIsWrong) {
  struct Case {
    std::string xml;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "not XML: no element found at line 1"},
      {"<ListBucketResult><Contents><Key>a</Key><Size>1</Size>",
       "not XML: no element found at line 1"},
      {"<Error><Code>NoSuchBucket</Code></Error>", "expected <ListBucketResult>, got <Error>"},
      {"<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
       "<Contents> #1 has no <Key>"},
      {"<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>",
       "<Contents> #1 has no <Size>"},
      {"<ListBucketResult><Contents><Key></Key><Size>1</Size></Contents></ListBucketResult>",
       "<Contents> #1 has an empty <Key>"},
      {"<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>",
       "<Size> \"-1\" of \"a\" is not a byte count"},
      {"<ListBucketResult><Contents><Key>a</Key><Size>99999999999999999999</Size></Contents>"
       "</ListBucketResult>",
       "<Size> \"99999999999999999999\" of \"a\" is not a byte count"},
      {"<ListBucketResult><Contents><Key>a</Key><Key>b</Key><Size>1</Size></Contents>"
       "</ListBucketResult>",
       "<Contents> #1 has two <Key>"},
      {"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
       "IsTruncated is true without a NextContinuationToken"},
      {"<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>",
       "<IsTruncated> \"yes\" is neither true nor false"},
      {"<!DOCTYPE x [<!ENTITY a \"aaaa\">]><ListBucketResult>&a;</ListBucketResult>",
       "a document type declaration is refused"},
      {"<ListBucketResult><Contents><Key>&unknown;</Key><Size>1</Size></Contents></"
       "ListBucketResult>",
       "not XML: undefined entity at line 1"},
  };
  for (const Case& c : cases) {
    auto page = ParseS3ListPage(c.xml);
    ASSERT_FALSE(page.has_value()) << c.xml;
    EXPECT_EQ(StatusCode::kInvalidArgument, page.error().code()) << c.xml;
    EXPECT_EQ(c.message, page.error().message()) << c.xml;
  }
}

TEST(ParseS3ListPage, RefusesDeepNestingAndHugeFields) {
  std::string deep = "<ListBucketResult>";
  for (int i = 0; i < 100; ++i) deep += "<a>";
  auto page = ParseS3ListPage(deep);
  ASSERT_FALSE(page.has_value());
  EXPECT_EQ("elements nested deeper than 32 levels", page.error().message());

  std::string huge = "<ListBucketResult><Contents><Key>" + std::string(100'000, 'k') +
                     "</Key><Size>1</Size></Contents></ListBucketResult>";
  page = ParseS3ListPage(huge);
  ASSERT_FALSE(page.has_value());
  EXPECT_EQ("<Key> holds more than 65536 bytes of text", page.error().message());
}

TEST(ParseS3ListPage, ManyEntriesAndWhitespaceBetweenThemAreFine) {
  std::string xml = "<ListBucketResult>\n";
  for (int i = 0; i < 20'000; ++i) {
    xml += "  <Contents>\n    <Key>k" + std::to_string(i) + "</Key>\n    <Size>" +
           std::to_string(i) + "</Size>\n  </Contents>\n" + std::string(10, ' ');
  }
  xml += "</ListBucketResult>";
  auto page = ParseS3ListPage(xml);
  ASSERT_OK(page);
  ASSERT_EQ(20'000u, page->objects.size());
  EXPECT_EQ("k19999", page->objects.back().key);
  EXPECT_EQ(19'999u, page->objects.back().size_bytes);
}

constexpr char kAzurePage[] = R"(<?xml version="1.0" encoding="utf-8"?>
<EnumerationResults ServiceEndpoint="http://127.0.0.1:10000/devstoreaccount1" ContainerName="c">
  <Prefix>p/</Prefix><MaxResults>2</MaxResults>
  <Blobs>
    <Blob><Name>p/a b.bin</Name><Properties><Creation-Time>x</Creation-Time>
      <Etag>0x8DB4B5C6A1B2C3D</Etag><Content-Length>42</Content-Length>
      <BlobType>BlockBlob</BlobType></Properties></Blob>
    <Blob><Name Encoded="true">p/%EF%BF%BE</Name><Properties><Content-Length>1</Content-Length></Properties></Blob>
    <Blob><Name>p/dir</Name><Properties><Content-Length>0</Content-Length><ResourceType>directory</ResourceType></Properties></Blob>
  </Blobs>
  <NextMarker>2!72!MDAwMDA4IXAvYi5iaW4hMDAwMDI4ITk5OTktMTItMzFUMjM6NTk6NTkuOTk5OTk5OVoh</NextMarker>
</EnumerationResults>)";

TEST(ParseAzureListPage, ReadsBlobsAndTheMarker) {
  auto page = ParseAzureListPage(kAzurePage);
  ASSERT_OK(page);
  ASSERT_EQ(2u, page->blobs.size());  // the directory is left out
  EXPECT_EQ("p/a b.bin", page->blobs[0].key);
  EXPECT_EQ(42u, page->blobs[0].size_bytes);
  EXPECT_EQ("0x8DB4B5C6A1B2C3D", page->blobs[0].etag);
  EXPECT_EQ("p/\xEF\xBF\xBE", page->blobs[1].key);
  EXPECT_EQ("2!72!MDAwMDA4IXAvYi5iaW4hMDAwMDI4ITk5OTktMTItMzFUMjM6NTk6NTkuOTk5OTk5OVoh",
            page->next_marker);
  auto last = ParseAzureListPage("<EnumerationResults><Blobs/><NextMarker/></EnumerationResults>");
  ASSERT_OK(last);
  EXPECT_TRUE(last->blobs.empty());
  EXPECT_EQ("", last->next_marker);
}

TEST(ParseAzureListPage, RefusesBadPages) {
  struct Case {
    std::string xml, message;
  };
  const std::vector<Case> cases = {
      {"<ListBucketResult/>", "expected <EnumerationResults>, got <ListBucketResult>"},
      {"<EnumerationResults><Blobs><Blob><Properties><Content-Length>1</Content-Length>"
       "</Properties></Blob></Blobs></EnumerationResults>",
       "<Blob> #1 has no <Name>"},
      {"<EnumerationResults><Blobs><Blob><Name>a</Name></Blob></Blobs></EnumerationResults>",
       "<Blob> #1 has no <Content-Length>"},
      {"<EnumerationResults><Blobs><Blob><Name>a</Name><Properties><Content-Length>1x"
       "</Content-Length></Properties></Blob></Blobs></EnumerationResults>",
       "<Content-Length> \"1x\" of \"a\" is not a byte count"},
      {"<EnumerationResults><NextMarker>a</NextMarker><NextMarker>b</NextMarker>"
       "</EnumerationResults>",
       "two <NextMarker>"},
      {"<EnumerationResults><Blobs><Blob><Name>a", "not XML: no element found at line 1"},
  };
  for (const Case& c : cases) {
    auto page = ParseAzureListPage(c.xml);
    ASSERT_FALSE(page.has_value()) << c.xml;
    EXPECT_EQ(c.message, page.error().message()) << c.xml;
  }
}

TEST(ParseStoreError, ReadsCodeAndMessageOfS3AndAzureErrors) {
  auto e = ParseStoreError(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does "
      "not exist</Message><BucketName>b</BucketName></Error>");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ("NoSuchBucket", e->code);
  EXPECT_EQ("The specified bucket does not exist", e->message);
  EXPECT_FALSE(ParseStoreError("").has_value());
  EXPECT_FALSE(ParseStoreError("<html>502 Bad Gateway</html>").has_value());
  EXPECT_FALSE(ParseStoreError("<Error><Message>no code</Message></Error>").has_value());
  EXPECT_FALSE(ParseStoreError("<Error><Code>x</Code>").has_value());  // truncated
}

TEST(XmlEscape, EscapesWhatXmlWouldReadOtherwise) {
  EXPECT_EQ("a&amp;b&lt;c&gt;d&quot;e&apos;f&#13;g\n\xe6\x97\xa5",
            XmlEscape("a&b<c>d\"e'f\rg\n\xe6\x97\xa5"));
  auto back = ParseDeleteResult("<DeleteResult><Error><Key>" + XmlEscape("k&<>\"'\r") +
                                "</Key><Code>c</Code></Error></DeleteResult>");
  ASSERT_OK(back);
  ASSERT_EQ(1u, back->size());
  EXPECT_EQ("k&<>\"'\r", (*back)[0].key);
}

TEST(ParseDeleteResult, ReadsTheKeysNotDeleted) {
  auto r = ParseDeleteResult(
      "<?xml version=\"1.0\"?><DeleteResult><Deleted><Key>a</Key></Deleted>"
      "<Error><Key>b&amp;c</Key><Code>AccessDenied</Code><Message>no</Message></Error>"
      "<Error><Key>d</Key><Code>InternalError</Code></Error></DeleteResult>");
  ASSERT_OK(r);
  ASSERT_EQ(2u, r->size());
  EXPECT_EQ("b&c", (*r)[0].key);
  EXPECT_EQ("AccessDenied", (*r)[0].code);
  EXPECT_EQ("no", (*r)[0].message);
  EXPECT_EQ("d", (*r)[1].key);
  EXPECT_EQ("", (*r)[1].message);
  auto quiet = ParseDeleteResult("<DeleteResult/>");
  ASSERT_OK(quiet);
  EXPECT_TRUE(quiet->empty());
  EXPECT_STATUS(ParseDeleteResult("<Error><Code>x</Code></Error>"), kInvalidArgument,
                "expected <DeleteResult>, got <Error>");
  EXPECT_STATUS(ParseDeleteResult("<DeleteResult><Error><Code>x</Code></Error></DeleteResult>"),
                kInvalidArgument, "<Error> #1 has no <Key>");
  EXPECT_STATUS(ParseDeleteResult(""), kInvalidArgument, "not XML: no element found");
  EXPECT_STATUS(ParseDeleteResult("<DeleteResult><Error>"), kInvalidArgument, "not XML");
}

TEST(ParseUploadId, ReadsTheIdOfACreatedMultipartUpload) {
  auto id = ParseUploadId(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><Key>packs/x.pack</Key>"
      "<UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId>"
      "</InitiateMultipartUploadResult>");
  ASSERT_TRUE(id.has_value()) << id.error().message();
  EXPECT_EQ("VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA", *id);
  EXPECT_EQ(
      "no <UploadId>",
      ParseUploadId("<InitiateMultipartUploadResult><Key>k</Key></InitiateMultipartUploadResult>")
          .error()
          .message());
  EXPECT_EQ("expected <InitiateMultipartUploadResult>, got <Error>",
            ParseUploadId("<Error><Code>AccessDenied</Code></Error>").error().message());
  EXPECT_EQ(
      "two <UploadId>",
      ParseUploadId("<InitiateMultipartUploadResult><UploadId>a</UploadId><UploadId>b</UploadId>"
                    "</InitiateMultipartUploadResult>")
          .error()
          .message());
}

}  // namespace
}  // namespace bdn::objstore
