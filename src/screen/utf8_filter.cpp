#include "screen/utf8_filter.h"

namespace ptyvisor::screen {
namespace {

constexpr char kReplacement[] = "\xef\xbf\xbd";  // U+FFFD

// Bytes in the character a lead byte starts; 0 for a byte that cannot start one.
std::size_t sequence_length(std::uint8_t lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xc2 && lead <= 0xdf) return 2;
    if (lead >= 0xe0 && lead <= 0xef) return 3;
    if (lead >= 0xf0 && lead <= 0xf4) return 4;
    return 0;  // a continuation byte, an overlong lead (C0, C1), or beyond U+10FFFF
}

// Whether `b` may be byte `index` (1..3) of a character that starts with `lead`. The second
// byte's narrower ranges exclude overlongs, surrogates and code points beyond U+10FFFF.
bool continues(std::uint8_t lead, std::size_t index, std::uint8_t b) {
    if (index == 1) {
        switch (lead) {
            case 0xe0: return b >= 0xa0 && b <= 0xbf;
            case 0xed: return b >= 0x80 && b <= 0x9f;
            case 0xf0: return b >= 0x90 && b <= 0xbf;
            case 0xf4: return b >= 0x80 && b <= 0x8f;
            default: break;
        }
    }
    return b >= 0x80 && b <= 0xbf;
}

}  // namespace

void Utf8Filter::filter(std::span<const std::uint8_t> in, std::string& out) {
    const std::size_t n = in.size();
    std::size_t i = 0;
    // First, the character the last call ended in the middle of.
    while (held_size_ > 0 && i < n) {
        const std::size_t length = sequence_length(held_[0]);
        if (!continues(held_[0], held_size_, in[i])) {
            out += kReplacement;
            held_size_ = 0;
            break;
        }
        held_[held_size_++] = in[i++];
        if (held_size_ == length) {
            out.append(reinterpret_cast<const char*>(held_.data()), length);
            held_size_ = 0;
        }
    }
    if (held_size_ > 0) return;  // still unfinished: all of `in` continued it

    while (i < n) {
        if (in[i] < 0x80) {  // the common case: a run of ASCII
            std::size_t j = i + 1;
            while (j < n && in[j] < 0x80) ++j;
            out.append(reinterpret_cast<const char*>(in.data() + i), j - i);
            i = j;
            continue;
        }
        const std::uint8_t lead = in[i];
        const std::size_t length = sequence_length(lead);
        if (length == 0) {
            out += kReplacement;
            ++i;
            continue;
        }
        std::size_t k = 1;
        while (k < length && i + k < n && continues(lead, k, in[i + k])) ++k;
        if (k == length) {
            out.append(reinterpret_cast<const char*>(in.data() + i), length);
        } else if (i + k == n) {  // cut by the end of this call: hold it for the next
            for (std::size_t m = 0; m < k; ++m) held_[m] = in[i + m];
            held_size_ = k;
        } else {  // the maximal subpart of an ill-formed sequence: one U+FFFD
            out += kReplacement;
        }
        i += k;
    }
}

}  // namespace ptyvisor::screen
