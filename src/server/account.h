// Resolving the agent's account once, at start-up.
#pragma once

#include <string>

#include "backends/backend.h"

namespace ptyvisor::server {

// Fills `out` from the password and group databases. False with `why` when the account
// cannot be looked up, does not exist or is root (docs/architecture.md, "Error conventions").
bool resolve_account(const std::string& name, backends::Account& out, std::string& why);

}  // namespace ptyvisor::server
