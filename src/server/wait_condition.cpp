#include "server/wait_condition.h"

#include <algorithm>

namespace ptyvisor::server {

bool WaitCondition::compile(std::string& why) {
    re2::RE2::Options options;
    options.set_log_errors(false);
    options.set_max_mem(8 << 20);  // a pattern that needs more fails to compile
    pattern = std::make_unique<re2::RE2>(request.pattern, options);
    if (pattern->ok()) return true;
    why = pattern->error();
    return false;
}

bool WaitCondition::search(const OutputLog& log, std::uint64_t floor) {
    if (!pattern || scanned >= log.end()) return false;
    const std::uint64_t from = std::max({log.start(), floor, scanned > kOverlap ? scanned - kOverlap : 0});
    const auto bytes = log.copy(from, static_cast<std::size_t>(log.end() - from));
    const re2::StringPiece text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    re2::StringPiece match;
    scanned = log.end();
    if (!pattern->Match(text, 0, text.size(), re2::RE2::UNANCHORED, &match, 1)) return false;
    match_start = from + static_cast<std::uint64_t>(match.data() - text.data());
    match_end = match_start + match.size();
    return true;
}

}  // namespace ptyvisor::server
