// Flags of the deployment-config commands: bdn mounts apply|lock.
#include "flags.h"

namespace bdn::app {

void AddMountsFlags(CLI::App&, Invocation&) {}

}  // namespace bdn::app
