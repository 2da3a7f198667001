// The messages between ptyvisord and its screen worker (ptyvisor-screen), on a Unix stream
// socketpair. Both ends are the same build, so fields are in host byte order.
//
//   u32 length (of type + body), u8 type, body
//
// Daemon -> worker (small; the worker trusts them):
//   Open      session u32, capacity u64, from u64, upto u64, cols u16, rows u16,
//             scrollback u32; carries the log's memfd (read-only) as SCM_RIGHTS on its
//             first byte. The worker replays [from, upto) without answering queries: those
//             bytes were answered (or not) when they were new; then acknowledges with
//             Advanced (as for an Advance: the daemon owes it nothing more meanwhile).
//   Advance   session u32, end u64: the log now ends at `end` (at most one unacknowledged
//             per session: the daemon coalesces).
//   Resize    session u32, at u64, cols u16, rows u16: the size changed after byte `at`.
//   Close     session u32.
//   Snapshot  ticket u32, session u32, upto u64, scrollback u32, attributes u8.
//
// Worker -> daemon (untrusted: the daemon bounds and checks every one, see screen_broker.h):
//   Advanced  session u32, offset u64, answers (the rest, <= kMaxAnswerBytes): the worker
//             has processed the log up to `offset`; `answers` are its replies to queries.
//   Screen    ticket u32, session u32, JSON ScreenReply (the rest, <= kMaxScreenPayloadSize).
//   Mark      session u32, kind u8, offset u64, exit code i32 (-1: none), text (the rest,
//             <= ShellMark::kMaxText): a shell's mark in the session's output
//             (server/shell_mark.h). The marks of the bytes an Open or Advance made the worker
//             process go out before its Advanced, in log order; replayed bytes' marks too (the
//             daemon ignores those it has). At most kMaxMarksPerReply before each Advanced.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/screen_payloads.h"

namespace ptyvisor::screen {

enum class MessageType : std::uint8_t {
    Open = 1,
    Advance = 2,
    Resize = 3,
    Close = 4,
    Snapshot = 5,
    Advanced = 101,
    Screen = 102,
    Mark = 103,
};

inline constexpr std::size_t kMaxAnswerBytes = 4096;
// Past this many marks before one Advanced, the oldest are dropped: a session whose output
// floods fake marks lies only about its own commands, and costs the daemon a bounded number
// of messages per round.
inline constexpr std::size_t kMaxMarksPerReply = 256;
inline constexpr std::size_t kMaxDaemonMessage = 64;
inline constexpr std::size_t kMaxWorkerMessage = 1 + 8 + protocol::kMaxScreenPayloadSize;

// Appends fixed-size fields; reads them back with bounds checks.
class Writer {
  public:
    explicit Writer(MessageType type) { bytes_.resize(4), put(static_cast<std::uint8_t>(type)); }
    template <class T>
    Writer& put(T v) {
        const auto at = bytes_.size();
        bytes_.resize(at + sizeof v);
        std::memcpy(bytes_.data() + at, &v, sizeof v);
        return *this;
    }
    Writer& put_bytes(std::string_view s) {
        bytes_.insert(bytes_.end(), s.begin(), s.end());
        return *this;
    }
    // The whole message, its length filled in.
    std::vector<std::uint8_t> finish() {
        const auto length = static_cast<std::uint32_t>(bytes_.size() - 4);
        std::memcpy(bytes_.data(), &length, 4);
        return std::move(bytes_);
    }

  private:
    std::vector<std::uint8_t> bytes_;
};

class Reader {
  public:
    explicit Reader(std::span<const std::uint8_t> body) : body_(body) {}
    template <class T>
    bool get(T& v) {
        if (body_.size() - at_ < sizeof v) return false;
        std::memcpy(&v, body_.data() + at_, sizeof v);
        at_ += sizeof v;
        return true;
    }
    std::string_view rest() {
        const auto r = body_.subspan(at_);
        at_ = body_.size();
        return {reinterpret_cast<const char*>(r.data()), r.size()};
    }
    [[nodiscard]] bool done() const { return at_ == body_.size(); }

  private:
    std::span<const std::uint8_t> body_;
    std::size_t at_ = 0;
};

// Splits complete messages off the front of `buffer`. Returns how many bytes the complete
// messages take; each is handed to `handle(type, body)`. A length of zero or above `max`
// is a broken peer: returns nullopt.
template <class Handle>
std::optional<std::size_t> split_messages(std::span<const std::uint8_t> buffer, std::size_t max, Handle&& handle) {
    std::size_t at = 0;
    while (buffer.size() - at >= 4) {
        std::uint32_t length = 0;
        std::memcpy(&length, buffer.data() + at, 4);
        if (length == 0 || length > max) return std::nullopt;
        if (buffer.size() - at - 4 < length) break;
        const auto type = static_cast<MessageType>(buffer[at + 4]);
        if (!handle(type, buffer.subspan(at + 5, length - 1))) return std::nullopt;
        at += 4 + length;
    }
    return at;
}

}  // namespace ptyvisor::screen
