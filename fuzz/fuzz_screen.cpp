// The side of the screen a session feeds: arbitrary output bytes, interleaved with resizes
// and snapshots, into the Emulator (src/screen/emulator.h), as the worker does. Every
// snapshot must pass the daemon's own check of a worker's reply (decode_screen with the
// session's size), and answers stay within their bound. The fed bytes also go through the
// worker's MarkScanner (src/screen/mark_scanner.h), whose marks must be within the bounds the
// daemon checks, in offset order, and the same as a scan of all the bytes in one piece.
//
// Input: a sequence of chunks. Each starts with a control byte c:
//   c % 8 == 0    resize to (next byte % 120 + 1) columns x (next byte % 60 + 1) rows
//   c % 8 == 1    snapshot with scrollback (next byte) and attributes (c & 0x80)
//   otherwise     feed the next (c % 64 + 1) bytes
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "protocol/screen_payloads.h"
#include "screen/emulator.h"
#include "screen/mark_scanner.h"

namespace {

void check_snapshot(const ptyvisor::screen::Emulator& e, std::uint32_t scrollback, bool attributes) {
    auto s = e.snapshot(scrollback, attributes);
    const std::string json = ptyvisor::protocol::encode(s);
    const ptyvisor::protocol::ScreenBounds bounds{e.cols(), e.rows(), scrollback, attributes};
    const auto decoded = ptyvisor::protocol::decode_screen(json, bounds);
    if (!decoded) {  // a screen the daemon would refuse: a worker it would kill
        std::fprintf(stderr, "refused: %s\n%s\n", decoded.error.c_str(), json.c_str());
        std::abort();
    }
}

using ptyvisor::server::ShellMark;

void check_marks(const std::vector<ShellMark>& marks, std::uint64_t end) {
    std::uint64_t last = 0;
    for (const ShellMark& m : marks) {
        const auto kind = static_cast<std::uint8_t>(m.kind);
        const bool has_text = m.kind == ShellMark::Kind::OutputStart || m.kind == ShellMark::Kind::Cwd;
        if (kind < 1 || kind > 5 || m.offset < last || m.offset > end || m.text.size() > ShellMark::kMaxText ||
            !ptyvisor::utf8::is_valid(m.text) || (!has_text && !m.text.empty()) ||
            (m.exit_code && (m.kind != ShellMark::Kind::CommandEnd || *m.exit_code < 0 || *m.exit_code > 255))) {
            std::fprintf(stderr, "a mark the daemon would refuse: kind %u offset %llu\n", kind,
                         static_cast<unsigned long long>(m.offset));
            std::abort();
        }
        last = m.offset;
    }
}

bool same(const std::vector<ShellMark>& a, const std::vector<ShellMark>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].kind != b[i].kind || a[i].offset != b[i].offset || a[i].exit_code != b[i].exit_code ||
            a[i].text != b[i].text)
            return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    ptyvisor::screen::Emulator e(40, 12, 50);
    ptyvisor::screen::MarkScanner scanner;
    std::vector<ShellMark> marks;
    std::string fed;
    std::size_t i = 0;
    while (i < size) {
        const std::uint8_t c = data[i++];
        if (c % 8 == 0 && i + 2 <= size) {
            e.resize(static_cast<std::uint16_t>(data[i] % 120 + 1), static_cast<std::uint16_t>(data[i + 1] % 60 + 1));
            i += 2;
        } else if (c % 8 == 1 && i < size) {
            check_snapshot(e, data[i++], (c & 0x80) != 0);
        } else {
            const std::size_t n = std::min<std::size_t>(c % 64 + 1, size - i);
            e.feed(std::span(data + i, n));
            scanner.scan(std::span(data + i, n), fed.size(), marks);
            fed.append(reinterpret_cast<const char*>(data + i), n);
            i += n;
        }
        const std::string answers = e.take_answers();
        if (answers.size() > ptyvisor::screen::Emulator::kMaxAnswerBytes) std::abort();
    }
    check_snapshot(e, 100, true);
    check_marks(marks, fed.size());
    ptyvisor::screen::MarkScanner whole;
    std::vector<ShellMark> at_once;
    whole.scan(std::span(reinterpret_cast<const std::uint8_t*>(fed.data()), fed.size()), 0, at_once);
    if (!same(marks, at_once)) {
        std::fprintf(stderr, "the marks depend on how the output was cut\n");
        std::abort();
    }
    return 0;
}
