// WaitCondition: what a WAIT (or a KILL that waits for the end) waits for, and the text
// search over a session's output log that WAIT for text does.
//
// The search is RE2's: its time is linear in the text and its memory bounded, whatever
// pattern the client sends. Each search covers the bytes not searched yet plus kOverlap
// bytes before them, so a match that straddles two reads is found; a match longer than
// kOverlap that straddles may be missed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <re2/re2.h>

#include "protocol/session_payloads.h"
#include "server/output_log.h"

namespace ptyvisor::server {

struct WaitCondition {
    static constexpr std::uint64_t kOverlap = 16 * 1024;

    protocol::WaitRequest request;
    bool kill = false;                  // a KILL: KILLED once the session has ended
    std::unique_ptr<re2::RE2> pattern;  // For::Text
    std::uint64_t scanned = 0;          // For::Text: searched up to here
    std::uint64_t search_floor = 0;     // For::Text: the request's `from`, resolved
    std::uint64_t seen_end = 0;         // For::Quiet: the log's end when the quiet began
    std::uint64_t match_start = 0, match_end = 0;

    // Compiles request.pattern; false with `why` when it is not a valid expression.
    bool compile(std::string& why);
    // Searches what `log` holds past `scanned` (and kOverlap before it, not before
    // `floor`). True when it matched; match_start/match_end are then set.
    bool search(const OutputLog& log, std::uint64_t floor);
};

}  // namespace ptyvisor::server
