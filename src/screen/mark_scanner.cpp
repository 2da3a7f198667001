#include "screen/mark_scanner.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "common/utf8.h"

namespace ptyvisor::screen {

using server::ShellMark;

namespace {

constexpr std::uint8_t kBel = 0x07, kEsc = 0x1b, kCan = 0x18, kSub = 0x1a, kDel = 0x7f;

// The OSCs whose payload is kept: the marks' prefixes.
constexpr std::array<std::string_view, 3> kWantedPrefixes = {"133;", "633;E;", "7;file://"};

bool could_be_mark(std::string_view payload) {
    return std::any_of(kWantedPrefixes.begin(), kWantedPrefixes.end(), [&](std::string_view prefix) {
        return payload.size() <= prefix.size() ? prefix.starts_with(payload) : payload.starts_with(prefix);
    });
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The byte of the two hex digits at text[i], or -1.
int hex_byte(std::string_view text, std::size_t i) {
    if (text.size() - i < 2) return -1;
    const int high = hex_value(text[i]), low = hex_value(text[i + 1]);
    return high < 0 || low < 0 ? -1 : high * 16 + low;
}

// The field of `parameters` (;-separated) that starts with `key`, without it.
std::optional<std::string_view> parameter(std::string_view parameters, std::string_view key) {
    while (!parameters.empty()) {
        const std::size_t end = std::min(parameters.find(';'), parameters.size());
        const std::string_view field = parameters.substr(0, end);
        if (field.starts_with(key)) return field.substr(key.size());
        parameters.remove_prefix(std::min(end + 1, parameters.size()));
    }
    return std::nullopt;
}

// An exit status: 1 to 3 decimal digits, at most 255.
std::optional<int> exit_status(std::string_view field) {
    if (field.empty() || field.size() > 3) return std::nullopt;
    int value = 0;
    for (const char c : field) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + (c - '0');
    }
    if (value > 255) return std::nullopt;
    return value;
}

// `value` less an escape (`introducer` and escape_length - 1 more bytes) that its end cut,
// when `cut_short`: the payload's end was lost.
std::string_view drop_cut_escape(std::string_view value, char introducer, std::size_t escape_length, bool cut_short) {
    if (!cut_short) return value;
    const std::size_t tail = std::min(value.size(), escape_length - 1);
    const std::size_t at = value.substr(value.size() - tail).find(introducer);
    return at == std::string_view::npos ? value : value.substr(0, value.size() - tail + at);
}

}  // namespace

std::string percent_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const int byte = text[i] == '%' ? hex_byte(text, i + 1) : -1;
        if (byte < 0) {
            out += text[i];
            continue;
        }
        out += static_cast<char>(byte);
        i += 2;
    }
    return out;
}

std::string vscode_unescape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\\') {
            out += '\\';
            ++i;
            continue;
        }
        const int byte = text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'x' ? hex_byte(text, i + 2) : -1;
        if (byte < 0) {
            out += text[i];
            continue;
        }
        out += static_cast<char>(byte);
        i += 3;
    }
    return out;
}

std::string mark_text(std::string text, bool cut_short) {
    std::size_t valid = 0;
    while (valid < text.size()) {
        const utf8::Sequence s = utf8::next(std::string_view(text).substr(valid));
        if (s.kind == utf8::Sequence::Kind::Character) {
            valid += s.length;
            continue;
        }
        if (s.kind == utf8::Sequence::Kind::Incomplete && cut_short) break;
        return {};
    }
    std::size_t end = std::min(valid, ShellMark::kMaxText);
    // A continuation byte is never a character's first: back up to one.
    while (end < valid && end > 0 && (static_cast<std::uint8_t>(text[end]) & 0xc0) == 0x80) --end;
    text.resize(end);
    return text;
}

void MarkScanner::reset() {
    state_ = State::Ground;
    payload_.clear();
    next_command_line_.reset();
}

void MarkScanner::start_osc() {
    state_ = State::Osc;
    osc_start_ = escape_at_;
    payload_.clear();
    wanted_ = true;
    truncated_ = false;
}

void MarkScanner::append(std::uint8_t c) {
    if (!wanted_) return;
    if (payload_.size() >= kMaxPayload) {
        truncated_ = true;
        return;
    }
    payload_ += static_cast<char>(c);
    // Other OSCs (titles, hyperlinks, colours) are not held.
    if (payload_.size() <= 9 && !could_be_mark(payload_)) {
        wanted_ = false;
        payload_.clear();
    }
}

void MarkScanner::scan(std::span<const std::uint8_t> bytes, std::uint64_t offset, std::vector<ShellMark>& marks) {
    if (offset != next_) reset();
    next_ = offset + bytes.size();
    const std::uint8_t* const data = bytes.data();
    const std::size_t size = bytes.size();
    std::size_t i = 0;
    while (i < size) {
        if (state_ == State::Ground) {
            // Most output: nothing to do until the next ESC.
            const void* escape = std::memchr(data + i, kEsc, size - i);
            if (!escape) return;
            i = static_cast<std::size_t>(static_cast<const std::uint8_t*>(escape) - data);
        }
        const std::uint8_t c = data[i];
        const std::uint64_t at = offset + i;
        ++i;
        if (c == kCan || c == kSub) {  // abandons any sequence
            state_ = State::Ground;
            continue;
        }
        switch (state_) {
            case State::Ground:  // c is ESC
            case State::Escape:
                if (c == kEsc) {
                    escape_at_ = at;
                    state_ = State::Escape;
                } else if (c == ']') {
                    start_osc();
                } else if (c >= 0x30 && c < kDel) {
                    state_ = State::Ground;  // a final byte: not an OSC
                }  // else a control, which runs, an intermediate byte, or one libvterm leaves
                break;
            case State::Osc:
                if (c == kBel) {
                    state_ = State::Ground;
                    finish(offset + i, marks);
                } else if (c == kEsc) {
                    escape_at_ = at;
                    state_ = State::OscEscape;
                } else if (c >= 0x20 && c != kDel) {
                    append(c);
                }  // else a control, which runs and is not part of the string
                break;
            case State::OscEscape:
                if (c == '\\') {
                    state_ = State::Ground;
                    finish(offset + i, marks);
                } else if (c == kEsc) {
                    escape_at_ = at;
                    state_ = State::Escape;
                } else if (c == ']') {
                    start_osc();
                } else if (c >= 0x30 && c < kDel) {
                    state_ = State::Ground;
                } else if (c >= 0x20 && c != kDel) {
                    state_ = State::Escape;  // as after ESC outside a string
                }  // else a control (even BEL), which runs: still after ESC in the string
                break;
        }
    }
}

void MarkScanner::finish(std::uint64_t end, std::vector<ShellMark>& marks) {
    if (!wanted_) return;
    const std::string_view payload = payload_;
    // Whether `value` lost its end with the payload's.
    const auto cut_short = [&](std::string_view value) {
        return truncated_ && value.data() + value.size() == payload.data() + payload.size();
    };
    ShellMark mark;
    mark.offset = end;
    if (payload.starts_with("133;") && payload.size() >= 5 && (payload.size() == 5 || payload[5] == ';')) {
        const std::string_view parameters = payload.size() > 6 ? payload.substr(6) : std::string_view{};
        switch (payload[4]) {
            case 'A':
                mark.kind = ShellMark::Kind::Prompt;
                next_command_line_.reset();  // an E that no C followed is not the next command's
                break;
            case 'B': mark.kind = ShellMark::Kind::CommandInput; break;
            case 'C':
                mark.kind = ShellMark::Kind::OutputStart;
                if (const auto url = parameter(parameters, "cmdline_url="))
                    mark.text = mark_text(percent_decode(drop_cut_escape(*url, '%', 3, cut_short(*url))), cut_short(*url));
                else if (next_command_line_)
                    mark.text = std::move(*next_command_line_);
                next_command_line_.reset();
                break;
            case 'D':
                mark.kind = ShellMark::Kind::CommandEnd;
                mark.offset = osc_start_;
                mark.exit_code = exit_status(parameters.substr(0, std::min(parameters.find(';'), parameters.size())));
                break;
            default: return;
        }
    } else if (payload.starts_with("633;E;")) {
        std::string_view line = payload.substr(6);
        line = line.substr(0, std::min(line.find(';'), line.size()));
        next_command_line_ = mark_text(vscode_unescape(drop_cut_escape(line, '\\', 4, cut_short(line))), cut_short(line));
        return;
    } else if (payload.starts_with("7;file://")) {
        const std::string_view location = payload.substr(9);
        const std::size_t path = location.find('/');
        if (path == std::string_view::npos) return;
        mark.kind = ShellMark::Kind::Cwd;
        const std::string_view path_part = location.substr(path);
        mark.text = mark_text(percent_decode(drop_cut_escape(path_part, '%', 3, cut_short(path_part))), cut_short(path_part));
    } else {
        return;
    }
    marks.push_back(std::move(mark));
}

}  // namespace ptyvisor::screen
