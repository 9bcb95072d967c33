// OpenRemote: a Context whose store and registry are a bdn serve origin.
#include "bdn/cli/commands.h"

namespace bdn::cli {

Result<Context> OpenRemote(const std::string& url, const std::string&, bool) {
  return Err(InvalidArgumentError("--remote " + url + ": remote origins are not available in this build"));
}

}  // namespace bdn::cli
