#include "screen/rep_expander.h"

#include <algorithm>

#include "common/utf8.h"
#include "screen/libvterm_combining.h"

namespace ptyvisor::screen {

namespace {

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

constexpr bool is_intermediate(unsigned char b) { return b >= 0x20 && b <= 0x2f; }

}  // namespace

// A single shift stays: libvterm's CAN does not end it either.
void RepExpander::reset() {
    state_ = State::Normal;
    interrupt();
}

void RepExpander::remember(char32_t code_point) {
    if (single_shift_) {
        // Printed through G2/G3 (the same bytes printed again would not be): not a character
        // to repeat, nor a base for marks.
        single_shift_ = false;
        forget();
        interrupt();
        return;
    }
    if (!joinable_) forget();  // a new character (or a mark alone: libvterm may not join it)
    joinable_ = true;
    if (recent_size_ == recent_.size()) {
        std::move(recent_.begin() + 1, recent_.end(), recent_.begin());
        --recent_size_;
    }
    recent_[recent_size_++] = code_point;
}

bool RepExpander::repeat(std::uint64_t count, const Sink& out) const {
    std::size_t base = recent_size_;
    while (base > 0) {
        --base;
        if (!libvterm_combines(recent_[base])) break;
        if (base == 0) return false;  // marks only: nothing to repeat
    }
    if (base == recent_size_) return false;  // nothing printed
    std::string character;
    for (std::size_t i = base; i < recent_size_ && i - base < kMaxCodePoints; ++i)
        append_utf8(character, recent_[i]);
    // Whole characters per write, so that every write is a text run of its own.
    const std::size_t per_chunk = kChunkBytes / character.size();
    std::string chunk;
    chunk.reserve(per_chunk * character.size());
    for (std::size_t i = 0; i < per_chunk && i < count; ++i) chunk += character;
    while (count > 0) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(count, per_chunk));
        out(std::string_view(chunk).substr(0, n * character.size()));
        count -= n;
    }
    return true;
}

// The states and transitions are libvterm 0.1.4's (src/parser.c, vterm_input_write), with the
// terminal in UTF-8 mode (the emulator sets it): C1 bytes are text, and only BEL or ESC \ end
// a string.
void RepExpander::feed(std::string_view in, std::size_t max_count, const Sink& out) {
    std::size_t passed = 0;  // in[passed, i) is still to be given to `out`
    std::size_t i = 0;
    while (i < in.size()) {
        const auto b = static_cast<unsigned char>(in[i]);
        if (b == 0x00 || b == 0x7f) {  // dropped by libvterm's parser, as if never sent
            ++i;
            continue;
        }
        if (b == 0x18 || b == 0x1a) {  // CAN, SUB: any sequence ends, nothing runs
            state_ = State::Normal;
            interrupt();
            ++i;
            continue;
        }
        if (b == 0x1b) {
            interrupt();
            state_ = state_ == State::String ? State::EscapeInString : State::Escape;
            escape_intermediate_ = false;
            ++i;
            continue;
        }
        if (b < 0x20 &&
            !(b == 0x07 && state_ == State::String)) {  // other C0: runs, the state stays
            interrupt();
            ++i;
            continue;
        }
        switch (state_) {
            case State::EscapeInString:
                if (b == 0x5c) {  // ST
                    state_ = State::Normal;
                    interrupt();
                    break;
                }
                state_ = State::Escape;
                [[fallthrough]];
            case State::Escape:
                if (b == 0x50 || b == 0x5d) {  // DCS, OSC
                    state_ = State::String;
                } else if (b == 0x5b) {  // CSI
                    state_ = State::CsiLeader;
                    csi_leader_ = false;
                } else if (is_intermediate(b)) {
                    escape_intermediate_ = true;
                } else if (!escape_intermediate_ && b >= 0x40 && b < 0x60) {  // a C1 control
                    single_shift_ = b == 'N' || b == 'O';                     // SS2, SS3
                    state_ = State::Normal;
                } else if (b >= 0x30 && b < 0x7f) {
                    state_ = State::Normal;
                }  // else libvterm ignores the byte and stays in the escape
                break;
            case State::CsiLeader:
                if (b >= 0x3c && b <= 0x3f) {
                    csi_leader_ = true;
                    break;
                }
                csi_first_argument_ = true;
                csi_separators_ = 0;
                csi_count_ = 0;
                state_ = State::CsiArgs;
                [[fallthrough]];
            case State::CsiArgs:
                if (b >= '0' && b <= '9') {
                    if (csi_first_argument_)
                        csi_count_ = std::min<std::uint64_t>(csi_count_ * 10 + (b - '0'), 1u << 30);
                    break;
                }
                if (b == ':' || b == ';') {
                    csi_first_argument_ = false;
                    if (++csi_separators_ >=
                        kMaxCsiArguments) {  // libvterm would write past its array
                        out(in.substr(passed, i - passed));
                        out("\x18");
                        passed = i + 1;
                        csi_intermediate_ = false;
                        state_ = State::CsiDropped;
                        interrupt();
                    }
                    break;
                }
                csi_intermediate_ = false;
                state_ = State::CsiIntermed;
                [[fallthrough]];
            case State::CsiIntermed:
                if (is_intermediate(b)) {
                    csi_intermediate_ = true;
                    break;
                }
                state_ = State::Normal;
                if (b == 'b' && !csi_leader_ && !csi_intermediate_) {
                    out(in.substr(passed, i - passed));
                    out("\x18");  // ends the CSI in libvterm's parser, which runs nothing
                    passed = i + 1;
                    // What was repeated was just printed: a mark after it joins it, as in libvterm.
                    joinable_ = repeat(
                        std::min<std::uint64_t>(std::max<std::uint64_t>(csi_count_, 1), max_count),
                        out);
                    break;
                }
                interrupt();  // another CSI, or an invalid one (its byte is eaten, not printed)
                break;
            case State::CsiDropped:
                // The rest of the cancelled CSI, to where libvterm's parser would have ended it:
                // any byte but an argument's (digits, separators) or an intermediate ends it,
                // and after an intermediate any byte but another intermediate.
                out(in.substr(passed, i - passed));
                passed = i + 1;
                if (is_intermediate(b))
                    csi_intermediate_ = true;
                else if (csi_intermediate_ || !((b >= '0' && b <= '9') || b == ';' || b == ':'))
                    state_ = State::Normal;
                break;
            case State::String:
                if (b == 0x07) state_ = State::Normal;
                break;
            case State::Normal: {
                const utf8::Sequence s = utf8::next(in.substr(i));
                if (s.kind == utf8::Sequence::Kind::Character && s.code_point >= 0x80 &&
                    s.code_point < 0xa0) {
                    // A C1 control encoded as a character: libvterm prints it with a width of
                    // -1, moving the cursor to column -1, where an insert then moves a negative
                    // number of cells (a segfault). A control, not text: it is dropped.
                    out(in.substr(passed, i - passed));
                    passed = i + s.length;
                    interrupt();
                } else if (s.kind == utf8::Sequence::Kind::Character) {
                    remember(s.code_point);
                } else {  // libvterm prints U+FFFD for what a cut sequence left: not repeated
                    forget();
                    interrupt();
                }
                i += s.length;
                continue;
            }
        }
        ++i;
    }
    if (passed < in.size()) out(in.substr(passed));
}

}  // namespace ptyvisor::screen
