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
//
// Idle sessions hold no emulator (issue 31: two libvterm screens of 80x24 cost 141 KiB, and
// an idle terminal shows nothing new). A session gets one at its first byte, snapshot or
// query, and loses it after kQuietPeriod without a message (evict_quiet) when the log still
// holds every byte it saw, with room to spare (evictable). It is rebuilt on demand by
// replaying those bytes with the resizes at the offsets they came (the path a restarted
// worker takes, made exact by the resize history), so that every screen and every answer is
// the one the evicted emulator would have given. If the log was overwritten past the
// session's first byte meanwhile (a burst of more than the log's spare room before the worker
// saw any of it), the rebuild gives what a restarted worker gives: the log's bytes at the
// session's current size.
#pragma once

#include <chrono>
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
    using Clock = std::chrono::steady_clock;
    // How long a session goes without a message before its emulator is given back. Rebuilding
    // costs a replay of at most half the log (evictable), a few milliseconds at 80x24, once
    // per quiet period at most.
    static constexpr std::chrono::milliseconds kQuietPeriod{5000};
    // Resizes remembered for a rebuild; a session resized more often keeps its emulator.
    static constexpr std::size_t kMaxResizeHistory = 64;

    explicit Worker(Send send) : send_(std::move(send)) {}

    // Handles one message from the daemon; `fds` holds descriptors received and not yet
    // claimed (Open takes the first). False when the message is malformed.
    bool handle(MessageType type, std::span<const std::uint8_t> body, std::vector<UniqueFd>& fds);
    [[nodiscard]] std::size_t sessions() const { return sessions_.size(); }
    // Sessions that hold an emulator now.
    [[nodiscard]] std::size_t resident() const { return resident_; }
    // Gives back the emulator of each session that has had no message since `now` minus
    // kQuietPeriod and can be rebuilt exactly. Returns how many it gave back.
    std::size_t evict_quiet(Clock::time_point now);
    // Whether a later evict_quiet() may give back an emulator: a session had a message since
    // the last one, or one that can be given back was not quiet yet. False when what is left
    // resident must stay (evictable), so that the process around sleeps without a timer.
    [[nodiscard]] bool sweep_due() const { return touched_ || waiting_ > 0; }

  private:
    struct SizeChange {
        std::uint64_t at;  // after the bytes before this offset
        std::uint16_t cols, rows;
    };
    struct Session {
        std::unique_ptr<Emulator> emulator;  // null while idle: rebuilt from the log
        const std::uint8_t* map = nullptr;
        std::size_t map_length = 0, capacity = 0;
        std::uint64_t processed = 0;
        std::uint64_t quiet_until = 0;  // no answers for bytes before this offset
        // What a rebuild replays: the bytes [origin, processed), from an emulator of
        // origin_cols x origin_rows, resized as `resizes` say. `replayable` is false once the
        // history overflowed: the emulator then stays.
        std::uint64_t origin = 0;
        std::uint16_t origin_cols = 0, origin_rows = 0, cols = 0, rows = 0;
        std::uint32_t scrollback = 0;
        std::vector<SizeChange> resizes;
        bool replayable = true;
        Clock::time_point last_used{};
        MarkScanner scanner;
        std::deque<server::ShellMark> marks;  // found, not yet sent
        ~Session();
    };
    // The session's emulator, rebuilt when it was given back.
    Emulator& emulator(Session& s);
    // Feeds the log's bytes [from, to) to `e`; false when some were overwritten.
    bool replay(const Session& s, Emulator& e, std::uint64_t from, std::uint64_t to);
    // Whether the session's emulator could be rebuilt exactly now (quiet or not).
    [[nodiscard]] bool evictable(const Session& s) const;
    void touch(Session& s);
    // Copies the log's bytes [at, at + n) into chunk_; false when the ring overwrote them.
    bool copy(const Session& s, std::uint64_t at, std::size_t n);
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
    std::size_t resident_ = 0;
    bool touched_ = false;    // a session had a message since the last evict_quiet()
    std::size_t waiting_ = 0;  // evictable sessions the last evict_quiet() found not yet quiet
    std::vector<std::uint8_t> chunk_;
    std::vector<server::ShellMark> found_;  // reused by process()
};

}  // namespace ptyvisor::screen
