#include "cli/mcp/terminal_text.h"

#include "common/utf8.h"

namespace ptyvisor::cli::mcp {
namespace {

constexpr unsigned char kEsc = 0x1b;
constexpr unsigned char kBel = 0x07;

bool in(unsigned char c, unsigned char low, unsigned char high) { return c >= low && c <= high; }

// Appends the character at bytes[at] (>= 0x80) and advances `at`. False when it is cut off
// by the chunk's end and not `final`: `at` then stays on it.
bool take_utf8(std::string_view bytes, std::size_t& at, bool final, std::string& text) {
    const utf8::Sequence s = utf8::next(bytes.substr(at));
    switch (s.kind) {
        case utf8::Sequence::Kind::Character:
            text.append(bytes.substr(at, s.length));
            break;
        case utf8::Sequence::Kind::IllFormed:  // one U+FFFD for its maximal subpart
            text.append(utf8::kReplacement);
            break;
        case utf8::Sequence::Kind::Incomplete:
            if (!final) return false;
            text.append(utf8::kReplacement);
            break;
    }
    at += s.length;
    return true;
}

bool is_string_introducer(unsigned char c) { return c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_'; }

class Stripper {
  public:
    Stripper(std::string_view bytes, ParseState state, bool final) : bytes_(bytes), state_(state), final_(final) {
        // A sequence begun in an earlier chunk cannot be held back any more.
        if (state_ != ParseState::Ground) sequence_start_ = kNone;
    }

    TerminalText run() {
        while (at_ < bytes_.size()) {
            if (!step()) return finish_at(at_);  // cut before a split "\r\n" or character
        }
        if (state_ == ParseState::Ground || final_) return finish_at(bytes_.size(), ParseState::Ground);
        if (sequence_start_ != kNone && bytes_.size() - sequence_start_ <= kMaxHeldBack)
            return finish_at(sequence_start_, ParseState::Ground);
        return finish_at(bytes_.size(), state_);
    }

  private:
    static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

    TerminalText finish_at(std::size_t consumed, ParseState state = ParseState::Ground) {
        return {std::move(text_), consumed, state};
    }

    void begin_escape() {
        sequence_start_ = at_;
        state_ = ParseState::Escape;
        ++at_;
    }

    // One byte (or character) in the current state. False to stop before it.
    bool step() {
        const auto c = static_cast<unsigned char>(bytes_[at_]);
        switch (state_) {
            case ParseState::Ground:
                return ground(c);
            case ParseState::Escape:
                if (c == '[')
                    state_ = ParseState::Csi;
                else if (is_string_introducer(c))
                    state_ = ParseState::String;
                else if (in(c, 0x20, 0x2F))
                    state_ = ParseState::EscapeIntermediate;
                else if (c == kEsc)
                    return begin_escape(), true;  // the first ESC is dropped
                else
                    state_ = ParseState::Ground;  // a two-byte sequence (ESC 7, ESC =), or junk
                ++at_;
                return true;
            case ParseState::EscapeIntermediate:
                if (in(c, 0x20, 0x7E)) {
                    if (c >= 0x30) state_ = ParseState::Ground;
                    ++at_;
                } else {
                    state_ = ParseState::Ground;  // malformed: the byte is taken as text
                }
                return true;
            case ParseState::Csi:
                if (in(c, 0x20, 0x7E)) {
                    if (c >= 0x40) state_ = ParseState::Ground;  // the final byte
                    ++at_;
                } else {
                    state_ = ParseState::Ground;  // malformed (a control or a non-ASCII byte)
                }
                return true;
            case ParseState::String:
                if (c == kBel)
                    state_ = ParseState::Ground;
                else if (c == kEsc)
                    state_ = ParseState::StringEscape;
                ++at_;
                return true;
            case ParseState::StringEscape:
                if (c == '\\') {
                    state_ = ParseState::Ground;
                    ++at_;
                } else {
                    // ESC not followed by a backslash ends the string and begins a sequence.
                    state_ = ParseState::Escape;
                    sequence_start_ = at_ - 1;
                }
                return true;
        }
        return true;
    }

    bool ground(unsigned char c) {
        if (c == kEsc) return begin_escape(), true;
        if (c == '\r') {
            if (at_ + 1 == bytes_.size() && !final_) return false;  // "\n" may follow
            text_ += '\n';
            at_ += (at_ + 1 < bytes_.size() && bytes_[at_ + 1] == '\n') ? 2 : 1;
            return true;
        }
        if (c == '\n' || c == '\t') {
            text_ += static_cast<char>(c);
            ++at_;
            return true;
        }
        if (c < 0x20 || c == 0x7F) {
            ++at_;  // BEL, backspace, shift-in/out...: nothing to read
            return true;
        }
        if (c < 0x80) {
            text_ += static_cast<char>(c);
            ++at_;
            return true;
        }
        return take_utf8(bytes_, at_, final_, text_);
    }

    std::string_view bytes_;
    ParseState state_;
    bool final_;
    std::size_t at_ = 0;
    std::size_t sequence_start_ = kNone;
    std::string text_;
};

}  // namespace

TerminalText strip_terminal_output(std::string_view bytes, ParseState state, bool final) {
    return Stripper(bytes, state, final).run();
}

TerminalText raw_terminal_output(std::string_view bytes, bool final) {
    TerminalText out;
    std::size_t at = 0;
    while (at < bytes.size()) {
        if (static_cast<unsigned char>(bytes[at]) < 0x80) {
            out.text += bytes[at++];
        } else if (!take_utf8(bytes, at, final, out.text)) {
            break;
        }
    }
    out.consumed = at;
    return out;
}

}  // namespace ptyvisor::cli::mcp
