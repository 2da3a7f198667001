// `ptyvisor run`: one interactive session, relayed between our stdio and the daemon
// (relay.h); or with --detach, a session that runs on without us, whose id we print.
//
// Exit status: the command's (code, or 128+signal); with --detach, 0 once it runs; 255 when
// the session could not be had or was lost, with the reason on stderr. Nothing else is
// printed unless something went wrong (or the session was ended by the supervisor), so output
// piped through us is byte-exact.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ptyvisor::cli {

struct RunOptions {
    std::optional<std::string> socket;     // --socket
    std::optional<std::string> directory;  // -C
    std::vector<std::string> env_settings; // -e NAME=VALUE, in order
    bool clean_env = false;                // --clean-env
    std::optional<std::string> size;       // --size COLSxROWS
    std::optional<std::string> term;       // --term
    bool quiet = false;                    // --quiet
    bool detach = false;                   // --detach
    bool shell_integration = false;        // --shell-integration: bash or zsh that marks its commands
    std::string profile;                   // --profile: a sandbox profile the daemon offers
    std::vector<std::string> command;      // CMD ARGS...
};

int run_command(const RunOptions& options);

}  // namespace ptyvisor::cli
