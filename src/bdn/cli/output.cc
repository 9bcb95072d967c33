#include "bdn/cli/output.h"

namespace bdn::cli {

std::string JsonText(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace bdn::cli
