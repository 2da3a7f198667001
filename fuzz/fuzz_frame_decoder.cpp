// libFuzzer target: FrameDecoder on an arbitrary byte stream fed in arbitrary splits.
//
// Input: two bytes that choose how the stream is split, then the stream itself. After every
// feed the decoder is drained. Checked, besides "no crash, no sanitizer report":
//   - every Ready frame's payload is within its type's bounds, and re-encoding it gives back
//     exactly the bytes of the stream it came from (nothing skipped, nothing invented);
//   - each Ready control frame's payload goes through its decoder (payload_fuzz.h checks);
//   - the decoder accounts for every byte: consumed + buffered == fed;
//   - a failure reports a header error and is final: Failed forever, nothing buffered.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "protocol/command_payloads.h"
#include "protocol/control_payloads.h"
#include "protocol/screen_payloads.h"
#include "protocol/session_payloads.h"
#include "payload_fuzz.h"
#include "protocol/frame.h"
#include "protocol/frame_decoder.h"

namespace {

using namespace ptyvisor;
using protocol::FrameDecoder;
using protocol::FrameType;

void check_frame(const protocol::Frame& f) {
    if (f.payload.size() < protocol::min_payload(f.type) ||
        f.payload.size() > protocol::max_payload(f.type))
        fuzz::fail("frame payload out of its type's bounds");
    const auto* p = f.payload.data();
    const auto n = f.payload.size();
    switch (f.type) {
        case FrameType::Start: fuzz::check_payload(p, n, protocol::decode_start); break;
        case FrameType::Started: fuzz::check_payload(p, n, protocol::decode_started); break;
        case FrameType::Resize: fuzz::check_payload(p, n, protocol::decode_resize); break;
        case FrameType::Signal: fuzz::check_payload(p, n, protocol::decode_signal); break;
        case FrameType::Exit: fuzz::check_payload(p, n, protocol::decode_exit); break;
        case FrameType::Error: fuzz::check_payload(p, n, protocol::decode_error); break;
        case FrameType::Attach: fuzz::check_payload(p, n, protocol::decode_attach); break;
        case FrameType::Attached: fuzz::check_payload(p, n, protocol::decode_attached); break;
        case FrameType::Detached: fuzz::check_payload(p, n, protocol::decode_detached); break;
        case FrameType::Sessions: fuzz::check_payload(p, n, protocol::decode_sessions); break;
        case FrameType::Read: fuzz::check_payload(p, n, protocol::decode_read); break;
        case FrameType::Log: fuzz::check_payload(p, n, protocol::decode_log); break;
        case FrameType::Wait: fuzz::check_payload(p, n, protocol::decode_wait); break;
        case FrameType::Waited: fuzz::check_payload(p, n, protocol::decode_waited); break;
        case FrameType::Kill: fuzz::check_payload(p, n, protocol::decode_kill); break;
        case FrameType::Killed: fuzz::check_payload(p, n, protocol::decode_killed); break;
        case FrameType::Sent: fuzz::check_payload(p, n, protocol::decode_sent); break;
        case FrameType::Dropped: fuzz::check_payload(p, n, protocol::decode_dropped); break;
        case FrameType::Snapshot: fuzz::check_payload(p, n, protocol::decode_snapshot); break;
        case FrameType::Screen: fuzz::check_payload(p, n, [](std::string_view t) { return protocol::decode_screen(t); });
            break;
        case FrameType::Commands: fuzz::check_payload(p, n, protocol::decode_commands); break;
        case FrameType::CommandList: fuzz::check_payload(p, n, protocol::decode_command_list); break;
        case FrameType::Exec: fuzz::check_payload(p, n, protocol::decode_exec); break;
        case FrameType::Executed: fuzz::check_payload(p, n, protocol::decode_executed); break;
        case FrameType::Watch: fuzz::check_payload(p, n, protocol::decode_watch); break;
        case FrameType::Event: fuzz::check_payload(p, n, protocol::decode_event); break;
        case FrameType::Control: fuzz::check_payload(p, n, protocol::decode_control); break;
        case FrameType::Controller: fuzz::check_payload(p, n, protocol::decode_controller); break;
        case FrameType::Refused: fuzz::check_payload(p, n, protocol::decode_refused); break;
        case FrameType::Recording: fuzz::check_payload(p, n, protocol::decode_recording); break;
        case FrameType::Cast: fuzz::check_payload(p, n, protocol::decode_cast); break;
        case FrameType::Send: {
            // Binary: fuzz_session_payloads checks its decoder's invariants; here, no crash.
            (void)protocol::decode_send(std::span(p, n));
            break;
        }
        case FrameType::Input:
        case FrameType::Output:
        case FrameType::Stop:
        case FrameType::StatusRequest:
        case FrameType::Status:
        case FrameType::Detach:
        case FrameType::List: break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    // Split plan: a largest chunk from the first byte, a pseudo-random sequence from both.
    constexpr std::size_t kLargest[] = {1, 2, 3, 7, 8, 9, 64, 1 << 20};
    const std::size_t largest = kLargest[data[0] & 7u];
    std::uint32_t state = (std::uint32_t{data[0]} << 8) | data[1];
    const std::span<const std::uint8_t> stream(data + 2, size - 2);

    FrameDecoder decoder;
    std::size_t fed = 0, consumed = 0;
    while (fed < stream.size()) {
        state = state * 1103515245u + 12345u;
        const std::size_t chunk = std::min(stream.size() - fed, 1 + (state >> 8) % largest);
        decoder.feed(stream.subspan(fed, chunk));
        fed += chunk;

        protocol::Frame frame{};
        FrameDecoder::Status status;
        while ((status = decoder.next(frame)) == FrameDecoder::Status::Ready) {
            check_frame(frame);
            const auto wire = protocol::encode_frame(frame.type, std::span<const std::uint8_t>(frame.payload), frame.version);
            if (wire.size() > fed - consumed ||
                !std::equal(wire.begin(), wire.end(), stream.begin() + static_cast<std::ptrdiff_t>(consumed)))
                fuzz::fail("decoded frame does not re-encode to the bytes it came from");
            consumed += wire.size();
        }
        if (status == FrameDecoder::Status::Failed) {
            const auto e = decoder.error();
            if (e != protocol::ErrorCode::BadFrame && e != protocol::ErrorCode::UnsupportedVersion &&
                e != protocol::ErrorCode::TooBig)
                fuzz::fail("decoder failed with a non-header error");
            if (decoder.buffered() != 0) fuzz::fail("failed decoder still buffers bytes");
            decoder.feed(stream.subspan(consumed));
            if (decoder.next(frame) != FrameDecoder::Status::Failed || decoder.error() != e ||
                decoder.buffered() != 0)
                fuzz::fail("decoder recovered after a failure");
            return 0;
        }
        if (consumed + decoder.buffered() != fed) fuzz::fail("decoder lost or invented bytes");
        if (decoder.mid_frame() != (decoder.buffered() > 0)) fuzz::fail("mid_frame() is wrong");
    }
    return 0;
}
