#include "common/utf8.h"

namespace ptyvisor::utf8 {

Sequence next(std::string_view bytes) {
    const auto lead = static_cast<std::uint8_t>(bytes[0]);
    if (lead < 0x80) return {Sequence::Kind::Character, 1, lead};
    std::size_t length = 0;
    char32_t code_point = 0;
    // The second byte's narrower ranges exclude overlongs, surrogates and > U+10FFFF.
    std::uint8_t low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
        code_point = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        code_point = lead & 0x0F;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        code_point = lead & 0x07;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else {
        return {Sequence::Kind::IllFormed, 1};  // 80..C1 and F5..FF never start a character
    }
    for (std::size_t k = 1; k < length; ++k) {
        if (k >= bytes.size()) return {Sequence::Kind::Incomplete, k};
        const auto b = static_cast<std::uint8_t>(bytes[k]);
        if (b < (k == 1 ? low : 0x80) || b > (k == 1 ? high : 0xBF)) return {Sequence::Kind::IllFormed, k};
        code_point = code_point << 6 | (b & 0x3F);
    }
    return {Sequence::Kind::Character, length, code_point};
}

bool is_valid(std::string_view text) {
    while (!text.empty()) {
        const Sequence s = next(text);
        if (s.kind != Sequence::Kind::Character) return false;
        text.remove_prefix(s.length);
    }
    return true;
}

std::string replace_invalid(std::string_view bytes) {
    StreamDecoder decoder;
    std::string out;
    out.reserve(bytes.size());
    decoder.decode({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()}, out);
    decoder.flush(out);
    return out;
}

void StreamDecoder::decode(std::span<const std::uint8_t> bytes, std::string& out) {
    const std::string_view in(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    std::size_t i = 0;
    // First the held character, a byte at a time until it is whole or broken.
    while (held_size_ > 0 && i < in.size()) {
        held_[held_size_] = in[i];
        const Sequence s = next({held_, held_size_ + 1});
        if (s.kind == Sequence::Kind::IllFormed) {
            // The held bytes were a well-formed prefix: the new byte breaks it, and is read
            // afresh below.
            out += kReplacement;
            held_size_ = 0;
            break;
        }
        ++held_size_;
        ++i;
        if (s.kind == Sequence::Kind::Character) {
            out.append(held_, held_size_);
            held_size_ = 0;
        }
    }
    if (held_size_ > 0) return;  // all of `bytes` continued it, and it is still unfinished

    while (i < in.size()) {
        if (static_cast<std::uint8_t>(in[i]) < 0x80) {  // the common case: a run of ASCII
            std::size_t end = i + 1;
            while (end < in.size() && static_cast<std::uint8_t>(in[end]) < 0x80) ++end;
            out.append(in.substr(i, end - i));
            i = end;
            continue;
        }
        const Sequence s = next(in.substr(i));
        switch (s.kind) {
            case Sequence::Kind::Character: out.append(in.substr(i, s.length)); break;
            case Sequence::Kind::IllFormed: out += kReplacement; break;
            case Sequence::Kind::Incomplete:
                in.copy(held_, s.length, i);
                held_size_ = s.length;
                break;
        }
        i += s.length;
    }
}

void StreamDecoder::flush(std::string& out) {
    if (held_size_ == 0) return;
    out += kReplacement;
    held_size_ = 0;
}

}  // namespace ptyvisor::utf8
