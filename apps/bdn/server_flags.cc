// Flags of the server commands: bdn serve, bdn cache serve, bdn key.
#include "flags.h"

namespace bdn::app {

void AddServerFlags(CLI::App&, Invocation&) {}

}  // namespace bdn::app
