// Resolving the agent's account once, at start-up.
#pragma once

#include <optional>
#include <string>

#include "backends/backend.h"

namespace ptyvisor::server {

// nullopt with `why` when the account does not exist or is root.
std::optional<backends::Account> resolve_account(const std::string& name, std::string& why);

}  // namespace ptyvisor::server
