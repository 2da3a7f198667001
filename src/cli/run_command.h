// `ptyvisor run`: one interactive session, relayed between our stdio and the daemon.
//
// Exit status: the command's (code, or 128+signal); 255 when the session could not be had or
// was lost, with the reason on stderr. Nothing else is printed unless something went wrong
// (or the session was ended by the supervisor), so output piped through us is byte-exact.
#pragma once

#include <optional>
#include <string>
#include <string_view>
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
    std::vector<std::string> command;      // CMD ARGS...
};

int run_command(const RunOptions& options);

// What to send when a non-terminal stdin ends: ^D, which ends input for a command reading a
// terminal in canonical mode. When the last byte sent did not end a line, the first ^D only
// hands over the partial line, as on a local terminal, so a second one is needed.
// `last_byte` is the last input byte sent, or nullopt when there was no input.
std::string_view end_of_input(std::optional<char> last_byte);

}  // namespace ptyvisor::cli
