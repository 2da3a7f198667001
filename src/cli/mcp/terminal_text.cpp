#include "cli/mcp/terminal_text.h"

#include "common/utf8.h"

namespace ptyvisor::cli::mcp {
namespace {

constexpr unsigned char kEsc = 0x1b;
constexpr unsigned char kBel = 0x07;

bool in(unsigned char c, unsigned char low, unsigned char high) { return c >= low && c <= high; }

// Gives `emit` the character at bytes[at] (>= 0x80) and its index, and advances `at`. False
// when it is cut off by the chunk's end and not `final`: `at` then stays on it.
template <typename Emit>
bool take_utf8(std::string_view bytes, std::size_t& at, bool final, Emit emit) {
    const utf8::Sequence s = utf8::next(bytes.substr(at));
    switch (s.kind) {
        case utf8::Sequence::Kind::Character:
            emit(bytes.substr(at, s.length), at);
            break;
        case utf8::Sequence::Kind::IllFormed:  // one U+FFFD for its maximal subpart
            emit(utf8::kReplacement, at);
            break;
        case utf8::Sequence::Kind::Incomplete:
            if (!final) return false;
            emit(utf8::kReplacement, at);
            break;
    }
    at += s.length;
    return true;
}

bool is_string_introducer(unsigned char c) { return c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_'; }

class Parser {
  public:
    Parser(std::string_view bytes, ParseState state, bool final, TerminalEvents& events)
        : bytes_(bytes), state_(state), final_(final), events_(events) {
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
        return {std::string(), consumed, state};
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
                    return two_byte_escape(c), true;
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
                    if (c >= 0x40) end_csi(c);
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

    // A two-byte sequence (ESC 7, ESC =), or junk.
    void two_byte_escape(unsigned char c) {
        state_ = ParseState::Ground;
        if (sequence_start_ != kNone) events_.escape(static_cast<char>(c), sequence_start_);
        ++at_;
    }

    void end_csi(unsigned char final_byte) {
        state_ = ParseState::Ground;
        // sequence_start_ is the ESC, which "[" follows: the parameters begin two bytes on.
        if (sequence_start_ != kNone && bytes_[sequence_start_ + 1] == '[')
            events_.csi(bytes_.substr(sequence_start_ + 2, at_ - sequence_start_ - 2), static_cast<char>(final_byte),
                        sequence_start_);
    }

    bool ground(unsigned char c) {
        if (c == kEsc) return begin_escape(), true;
        if (c < 0x20 || c == 0x7F) {
            if (!events_.control(static_cast<char>(c), at_)) return false;
            ++at_;
            return true;
        }
        if (c < 0x80) {
            events_.character(bytes_.substr(at_, 1), at_);
            ++at_;
            return true;
        }
        return take_utf8(bytes_, at_, final_, [this](std::string_view character, std::size_t at) { events_.character(character, at); });
    }

    std::string_view bytes_;
    ParseState state_;
    bool final_;
    std::size_t at_ = 0;
    TerminalEvents& events_;
    std::size_t sequence_start_ = kNone;
};

// strip_terminal_output()'s text: characters, newlines and tabs; "\r\n" and a lone "\r" as
// "\n", holding back a "\r" at the chunk's end that a "\n" may follow.
class StripEvents final : public TerminalEvents {
  public:
    StripEvents(std::string_view bytes, bool final) : bytes_(bytes), final_(final) {}

    void character(std::string_view utf8, std::size_t) override { text += utf8; }
    bool control(char c, std::size_t at) override {
        if (c == '\r') {
            if (at + 1 == bytes_.size() && !final_) return false;  // "\n" may follow
            text += '\n';
            if (at + 1 < bytes_.size() && bytes_[at + 1] == '\n') newline_taken_at_ = at + 1;
        } else if (c == '\n') {
            if (at != newline_taken_at_) text += '\n';
        } else if (c == '\t') {
            text += '\t';
        }  // BEL, backspace, shift-in/out...: nothing to read
        return true;
    }
    void csi(std::string_view, char, std::size_t) override {}
    void escape(char, std::size_t) override {}

    std::string text;

  private:
    static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    std::string_view bytes_;
    bool final_;
    std::size_t newline_taken_at_ = kNone;  // the "\n" of a "\r\n" already written
};

}  // namespace

TerminalText parse_terminal_output(std::string_view bytes, ParseState state, bool final, TerminalEvents& events) {
    return Parser(bytes, state, final, events).run();
}

TerminalText strip_terminal_output(std::string_view bytes, ParseState state, bool final) {
    StripEvents strip(bytes, final);
    TerminalText out = parse_terminal_output(bytes, state, final, strip);
    out.text = std::move(strip.text);
    return out;
}

TerminalText raw_terminal_output(std::string_view bytes, bool final) {
    TerminalText out;
    std::size_t at = 0;
    while (at < bytes.size()) {
        if (static_cast<unsigned char>(bytes[at]) < 0x80) {
            out.text += bytes[at++];
        } else if (!take_utf8(bytes, at, final, [&out](std::string_view c, std::size_t) { out.text += c; })) {
            break;
        }
    }
    out.consumed = at;
    return out;
}

}  // namespace ptyvisor::cli::mcp
