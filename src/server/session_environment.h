// The environment a session's command starts with: the client's, then what a login would
// set. USER, LOGNAME, HOME and SHELL come from the account where the client left them out;
// TERM is always the one START named, so that it matches the terminal we emulate.
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"

namespace ptyvisor::server {

std::vector<std::string> session_environment(std::vector<std::string> client_env,
                                             const std::string& term,
                                             const backends::Account& account);

}  // namespace ptyvisor::server
