// Worker: the screen worker's state, one Emulator per session, fed from each session's
// output log (a read-only mapping of its memfd). Message handling only: the process around
// it (worker_main.cpp) does the sandboxing and the socket. Kept apart so that tests and the
// fuzz target can drive it in-process.
//
// Invariants: a session's emulator has seen exactly the log bytes [from, processed) in
// order, minus any the daemon overwrote before they were read (those are skipped: the ring
// moved on, and a screen that lost bytes is still a screen); answers to queries are kept
// only for bytes that arrived after the session was opened. The shell's marks in those bytes
// (mark_scanner.h) wait, at most kMaxMarksPerReply of them (the newest), for the next
// Advanced, which they precede.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "common/unique_fd.h"
#include "screen/emulator.h"
#include "screen/mark_scanner.h"
#include "screen/worker_protocol.h"

namespace ptyvisor::screen {

class Worker {
  public:
    using Send = std::function<void(std::vector<std::uint8_t>)>;
    explicit Worker(Send send) : send_(std::move(send)) {}

    // Handles one message from the daemon; `fds` holds descriptors received and not yet
    // claimed (Open takes the first). False when the message is malformed.
    bool handle(MessageType type, std::span<const std::uint8_t> body, std::vector<UniqueFd>& fds);
    [[nodiscard]] std::size_t sessions() const { return sessions_.size(); }

  private:
    struct Session {
        std::unique_ptr<Emulator> emulator;
        const std::uint8_t* map = nullptr;
        std::size_t map_length = 0, capacity = 0;
        std::uint64_t processed = 0;
        std::uint64_t quiet_until = 0;  // no answers for bytes before this offset
        MarkScanner scanner;
        std::deque<server::ShellMark> marks;  // found, not yet sent
        ~Session();
    };
    bool open(Reader& r, std::vector<UniqueFd>& fds);
    bool advance(Reader& r);
    bool resize(Reader& r);
    bool snapshot(Reader& r);
    void process(Session& s, std::uint64_t upto);
    // Sends the session's marks, then Advanced with `answers`.
    void send_advanced(std::uint32_t id, Session& s, std::string_view answers);
    [[nodiscard]] std::uint64_t log_start(const Session& s) const;

    Send send_;
    std::map<std::uint32_t, std::unique_ptr<Session>> sessions_;
    std::vector<std::uint8_t> chunk_;
    std::vector<server::ShellMark> found_;  // reused by process()
};

}  // namespace ptyvisor::screen
