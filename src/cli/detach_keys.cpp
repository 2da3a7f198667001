#include "cli/detach_keys.h"

#include <cctype>

namespace ptyvisor::cli {
namespace {

bool parse_key(std::string_view key, char& out) {
    if (key.size() == 1) {
        out = key[0];
        return true;
    }
    if (key.size() == 6 && key.substr(0, 5) == "ctrl-") {
        const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(key[5])));
        if (c >= 'a' && c <= 'z') {
            out = static_cast<char>(c - 'a' + 1);
            return true;
        }
        switch (key[5]) {
            case '@': out = 0; return true;
            case '[': out = 27; return true;
            case '\\': out = 28; return true;
            case ']': out = 29; return true;
            case '^': out = 30; return true;
            case '_': out = 31; return true;
            default: break;
        }
    }
    return false;
}

}  // namespace

bool parse_detach_keys(std::string_view spec, std::string& out, std::string& why) {
    std::string keys;
    std::size_t at = 0;
    while (at < spec.size()) {
        auto comma = spec.find(',', at);
        // A single ',' is a key of its own: "ctrl-p,," is ^P then ','.
        if (comma == at) comma = spec.find(',', at + 1);
        const auto key = spec.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
        char c = 0;
        if (!parse_key(key, c)) {
            why = "--detach-keys: '" + std::string(key) +
                  "' is not a key (use ctrl-X with X one of a-z @ [ \\ ] ^ _, or a single character), in '" +
                  std::string(spec) + "'";
            return false;
        }
        keys += c;
        if (comma == std::string_view::npos) break;
        at = comma + 1;
        if (at == spec.size()) {
            why = "--detach-keys: '" + std::string(spec) + "' ends with a comma";
            return false;
        }
    }
    out = std::move(keys);
    return true;
}

bool DetachKeyFilter::feed(std::string_view input, std::string& forward) {
    if (keys_.empty()) {
        forward += input;
        return false;
    }
    const std::string_view keys(keys_);
    for (const char c : input) {
        std::string candidate(keys.substr(0, matched_));
        candidate += c;
        if (candidate == keys) {
            matched_ = 0;
            return true;
        }
        // Pass on the shortest head of what was held plus `c` whose remainder may still
        // begin the sequence (a sequence "aab" typed as "aaab" detaches).
        std::size_t shift = 0;
        while (!keys.starts_with(std::string_view(candidate).substr(shift))) ++shift;
        forward.append(candidate, 0, shift);
        matched_ = candidate.size() - shift;
    }
    return false;
}

}  // namespace ptyvisor::cli
