#include "screen/alt_screen_watch.h"

namespace ptyvisor::screen {

void AltScreenWatch::end_digits() {
    if (digits_ > 4 || (digits_ > 0 && (value_ == 47 || value_ == 1047 || value_ == 1049))) candidate_ = true;
    digits_ = value_ = 0;
}

// Follows libvterm 0.1.4's parser (src/parser.c) where it matters: ESC starts over in every
// state, CAN and SUB end any sequence, NUL and DEL are dropped and other C0 controls are run
// without ending one (so digits on either side of them are one number), intermediates keep an
// escape sequence open, and an ESC [ after them is still a CSI. Past that it only ever says yes
// more often: a CSI is followed until its final byte even where libvterm drops it as invalid.
bool AltScreenWatch::scan(std::string_view bytes) {
    bool found = false;
    for (const char ch : bytes) {
        const auto b = static_cast<unsigned char>(ch);
        if (b == 0x1b) {
            state_ = State::Escape;
            continue;
        }
        if (b == 0x18 || b == 0x1a) {
            if (state_ == State::Csi) end_digits();
            state_ = State::Ground;
            continue;
        }
        if (b < 0x20 || b == 0x7f) continue;
        switch (state_) {
            case State::Ground: break;
            case State::Escape:
                if (b == '[') {
                    state_ = State::Csi;
                    question_ = candidate_ = false;
                    digits_ = value_ = 0;
                } else if (b >= 0x30) {  // not an intermediate: the escape sequence ends
                    state_ = State::Ground;
                }
                break;
            case State::Csi:
                if (b >= '0' && b <= '9') {
                    if (++digits_ <= 5) value_ = value_ * 10 + (b - '0');
                    break;
                }
                end_digits();
                if (b == '?') question_ = true;
                if (b >= 0x40 && b <= 0x7e) {
                    if (question_ && candidate_) found = true;
                    state_ = State::Ground;
                }
                break;
        }
    }
    return found;
}

}  // namespace ptyvisor::screen
