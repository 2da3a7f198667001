// WaitCondition: what a WAIT (or a KILL that waits for the end) waits for, and the text
// search over a session's output log that WAIT for text does.
//
// The search is RE2's: its time is linear in the text and its memory bounded, whatever
// pattern the client sends. Linear is not cheap: when RE2's DFA runs out of states it costs
// about 20 ns per byte per instruction of the pattern's program (16 s for 64 KiB under a
// 60-alternative pattern, docs/security.md "WAIT's pattern"). So a pattern's program is
// bounded (kMaxProgramSize), and the log is searched in slices, one per turn of the loop: a
// slice starts at kFirstSlice bytes and doubles while a turn costs less than a quarter of
// kTurnUsec, halving when it costs more. Each slice covers the bytes not searched yet plus
// an overlap before them (kOverlap, or the slice's size if smaller), so a match that
// straddles two slices is found unless it is longer than the overlap.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <re2/re2.h>

#include "protocol/session_payloads.h"
#include "server/output_log.h"

namespace ptyvisor::server {

struct WaitCondition {
    static constexpr std::uint64_t kOverlap = 16 * 1024;
    static constexpr int kMaxProgramSize = 1000;
    static constexpr std::uint64_t kFirstSlice = 1024, kMaxSlice = 1024 * 1024;
    static constexpr std::uint64_t kTurnUsec = 2000;
    enum class Found { Match, Nothing, More };

    protocol::WaitRequest request;
    bool kill = false;                  // a KILL: KILLED once the session has ended
    std::unique_ptr<re2::RE2> pattern;  // For::Text
    std::uint64_t scanned = 0;          // For::Text: searched up to here
    std::uint64_t search_floor = 0;     // For::Text: the request's `from`, resolved
    std::uint64_t seen_end = 0;         // For::Quiet: the log's end when the quiet began
    std::uint64_t match_start = 0, match_end = 0;
    std::uint64_t slice = kFirstSlice;  // For::Text: new bytes the next search may cover
    std::uint64_t after = 0;            // For::Command: a command with a greater seq ends
    std::optional<protocol::CommandRecord> command;  // For::Command: the one that ended

    // Compiles request.pattern; false with `why` when it is not a valid expression or its
    // program is larger than kMaxProgramSize.
    bool compile(std::string& why);
    // Searches one slice of what `log` holds past `scanned` (with the overlap before it, not
    // before `floor`). Match: match_start/match_end are set. More: the log holds bytes not
    // searched yet, for the next turn. Nothing: all of it was searched.
    Found search(const OutputLog& log, std::uint64_t floor);
};

}  // namespace ptyvisor::server
