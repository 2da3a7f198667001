#include "server/wait_condition.h"

#include <algorithm>
#include <chrono>

namespace ptyvisor::server {

bool WaitCondition::compile(std::string& why) {
    re2::RE2::Options options;
    options.set_log_errors(false);
    options.set_max_mem(8 << 20);  // a pattern that needs more fails to compile
    pattern = std::make_unique<re2::RE2>(request.pattern, options);
    if (!pattern->ok()) {
        why = pattern->error();
        return false;
    }
    if (const int size = pattern->ProgramSize(); size > kMaxProgramSize) {
        why = "the pattern is too complex (its program has " + std::to_string(size) + " instructions; at most " +
              std::to_string(kMaxProgramSize) + ")";
        return false;
    }
    return true;
}

WaitCondition::Found WaitCondition::search(const OutputLog& log, std::uint64_t floor) {
    if (!pattern) return Found::Nothing;
    scanned = std::max(scanned, log.start());
    if (scanned >= log.end()) return Found::Nothing;
    const std::uint64_t until = std::min(log.end(), scanned + slice);
    const std::uint64_t overlap = std::min(kOverlap, slice);
    const std::uint64_t from = std::max({log.start(), floor, scanned > overlap ? scanned - overlap : 0});
    const auto bytes = log.copy(from, static_cast<std::size_t>(until - from));
    const re2::StringPiece text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    re2::StringPiece match;
    const auto began = std::chrono::steady_clock::now();
    const bool matched = pattern->Match(text, 0, text.size(), re2::RE2::UNANCHORED, &match, 1);
    const auto cost = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began);
    // The next slice: what this one cost says what the pattern costs on this output.
    if (static_cast<std::uint64_t>(cost.count()) > kTurnUsec) slice = std::max(kFirstSlice / 4, slice / 2);
    else if (static_cast<std::uint64_t>(cost.count()) * 4 < kTurnUsec) slice = std::min(kMaxSlice, slice * 2);
    scanned = until;
    if (matched) {
        match_start = from + static_cast<std::uint64_t>(match.data() - text.data());
        match_end = match_start + match.size();
        return Found::Match;
    }
    return scanned < log.end() ? Found::More : Found::Nothing;
}

}  // namespace ptyvisor::server
