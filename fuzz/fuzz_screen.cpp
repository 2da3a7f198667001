// The side of the screen a session feeds: arbitrary output bytes, interleaved with resizes
// and snapshots, into the Emulator (src/screen/emulator.h), as the worker does. Every
// snapshot must pass the daemon's own check of a worker's reply (decode_screen with the
// session's size), and answers stay within their bound.
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

#include "protocol/screen_payloads.h"
#include "screen/emulator.h"

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    ptyvisor::screen::Emulator e(40, 12, 50);
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
            i += n;
        }
        const std::string answers = e.take_answers();
        if (answers.size() > ptyvisor::screen::Emulator::kMaxAnswerBytes) std::abort();
    }
    check_snapshot(e, 100, true);
    return 0;
}
