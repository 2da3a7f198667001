// The relay between our stdio and one session connection, shared by `ptyvisor run`,
// `ptyvisor attach` and `ptyvisor logs --follow`: an event loop over the daemon socket, stdin,
// stdout and our signals, with backpressure both ways (we read the daemon only when stdout has
// taken everything, and stdin only while the queue to the daemon is below its bound).
//
// What differs between them is the mode:
//
// | mode    | stdin                              | SIGWINCH | SIGINT       | SIGTERM, SIGHUP | at EXIT        |
// | ------- | ---------------------------------- | -------- | ------------ | --------------- | -------------- |
// | Run     | forwarded; its end sends ^D        | RESIZE   | SIGNAL (fg)  | STOP            | the status     |
// | Control | forwarded but the detach keys      | RESIZE   | SIGNAL (fg)  | DETACH          | the status     |
// | Observe | only the detach keys count         | -        | DETACH       | DETACH          | the status     |
// | Follow  | not read                           | -        | exit 130     | exit 128+N      | 0              |
//
// A second SIGTERM or SIGHUP (or SIGINT where the first one detached) stops waiting: we exit
// at once with 128+N. DETACHED ends the relay with 0. DROPPED writes nothing to stdout; when
// stdout is not a terminal, a note on stderr says what was lost.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "client/connection.h"
#include "protocol/payloads.h"

namespace ptyvisor::cli {

// Our failures, usage errors included: every other status is the session's.
inline constexpr int kFailure = 255;

enum class RelayMode { Run, Control, Observe, Follow };

struct RelayOptions {
    RelayMode mode = RelayMode::Run;
    bool stdin_is_tty = false;   // raw mode is on: stdin's end is a hang-up, not ^D
    int winch_fd = -1;           // terminal whose size SIGWINCH reports, or -1 (no RESIZE)
    bool quiet = false;          // no note when a session ended otherwise than by exiting
    std::string detach_keys;     // Control, Observe: the bytes that detach; empty for none
    // Follow: the offset asked for; ATTACHED's offset past it means older output was dropped.
    std::optional<std::uint64_t> requested_offset;
    // Run, Control: when the daemon goes away (a restart that keeps sessions, docs/
    // operations.md), connect to `socket` again and ATTACH by id from the next offset
    // expected, for up to `reattach_grace`: no byte twice, none missed. Zero: no re-attach.
    std::string socket;
    std::chrono::milliseconds reattach_grace{0};
};

// The re-attach grace: env PTYVISOR_REATTACH_SECONDS (0 turns re-attaching off), else 30 s.
std::chrono::milliseconds reattach_grace_from_environment();

// Runs until the session is over (or we detached); returns our exit status. `message` is
// then what to print on stderr once the terminal has been restored.
int relay_session(client::Connection& connection, const RelayOptions& options, std::string& message);

// Blocks SIGINT, SIGTERM, SIGHUP and SIGWINCH for the relay's signalfd, and ignores
// SIGPIPE. Returns 0 or a negative errno.
int block_relayed_signals();

// The window size of terminal `fd`, or nullopt.
std::optional<protocol::WindowSize> terminal_size(int fd);

// What to send when a non-terminal stdin ends (Run): ^D, which ends input for a command
// reading a terminal in canonical mode. When the last byte sent did not end a line, the first
// ^D only hands over the partial line, as on a local terminal, so a second one is needed.
// `last_byte` is the last input byte sent, or nullopt when there was no input.
std::string_view end_of_input(std::optional<char> last_byte);

// "ptyvisor: output before offset N was dropped; showing from N".
std::string dropped_before_note(std::uint64_t offset);

}  // namespace ptyvisor::cli
