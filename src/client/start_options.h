// StartOptions: everything START asks of the daemon.
//
// The working directory is proven, not named: the client opens it and sends the descriptor
// with START, together with its st_dev/st_ino, so the daemon can check that the agent can
// open it. Either give a path (opened O_RDONLY|O_DIRECTORY|O_CLOEXEC by Connection::start)
// or an already open directory descriptor, which stays the caller's.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "protocol/payloads.h"

namespace ptyvisor::client {

struct StartOptions {
    std::vector<std::string> argv;  // non-empty, UTF-8; argv[0] is looked up in env's PATH
    std::vector<std::string> env;   // "NAME=VALUE", UTF-8, sent as given
    std::string term;               // TERM for the session; empty means "dumb"
    protocol::WindowSize size;      // initial terminal size
    std::filesystem::path cwd = ".";  // used when cwd_fd < 0
    int cwd_fd = -1;                // borrowed directory descriptor; wins over cwd when >= 0
    bool detach = false;            // the session outlives the connection (protocol version 2)
    bool terminal = false;          // we relay a real terminal, which answers the program's queries (version 3)
    bool shell_integration = false; // argv is bash or zsh: start it with its integration (version 4)
    std::string profile;            // a sandbox profile's name; empty: the daemon's default (version 6)
};

}  // namespace ptyvisor::client
