// Fuzzes http::ParseListenAddress (http/message.h): text either fails with InvalidArgument
// "listen address \"<text>\": …" or gives a host and a port in 0..65535 whose canonical form
// ("HOST:PORT", "[IPV6]:PORT") parses back to the same address.
#include "bdn/http/message.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bdn;
  const std::string_view text = fuzz::Text(data, size);
  auto a = http::ParseListenAddress(text);
  if (!a) {
    FUZZ_CHECK(fuzz::IsError(a.error(), StatusCode::kInvalidArgument,
                             "listen address \"" + std::string(text) + "\": "),
               a.error().ToString());
    return 0;
  }
  FUZZ_CHECK(a->port >= 0 && a->port <= 65535, std::to_string(a->port));
  FUZZ_CHECK(!a->host.empty(), std::string(text));
  const std::string canonical =
      (a->host.find(':') != std::string::npos ? "[" + a->host + "]" : a->host) + ":" +
      std::to_string(a->port);
  auto again = http::ParseListenAddress(canonical);
  FUZZ_CHECK(again && again->host == a->host && again->port == a->port,
             std::string(text) + " -> " + canonical);
  return 0;
}
