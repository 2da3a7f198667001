// libFuzzer target: the decoders of protocol versions 2, 4 and 5 (protocol/session_payloads.h,
// protocol/command_payloads.h, protocol/control_payloads.h) on
// arbitrary bytes. The first byte picks the decoder, the rest is its input; the invariants
// are payload_fuzz.h's (a refusal has a reason; what is accepted survives a round trip).
// (Before payload_fuzz.h: its template names protocol::encode, and sees the overloads
// declared before it.)
#include "protocol/command_payloads.h"
#include "protocol/control_payloads.h"
#include "protocol/session_payloads.h"
#include "payload_fuzz.h"

namespace {

using namespace ptyvisor::protocol;

template <class Decode>
void check(const std::uint8_t* data, std::size_t size, Decode decode) {
    ptyvisor::fuzz::check_payload(data, size, decode);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::uint8_t which = data[0];
    ++data;
    --size;
    switch (which % 25) {
        case 0: check(data, size, [](std::string_view t) { return decode_attach(t); }); break;
        case 1: check(data, size, [](std::string_view t) { return decode_attached(t); }); break;
        case 2: check(data, size, [](std::string_view t) { return decode_detached(t); }); break;
        case 3: check(data, size, [](std::string_view t) { return decode_sessions(t); }); break;
        case 4: check(data, size, [](std::string_view t) { return decode_read(t); }); break;
        case 5: check(data, size, [](std::string_view t) { return decode_log(t); }); break;
        case 6: check(data, size, [](std::string_view t) { return decode_wait(t); }); break;
        case 7: check(data, size, [](std::string_view t) { return decode_waited(t); }); break;
        case 8: check(data, size, [](std::string_view t) { return decode_kill(t); }); break;
        case 9: check(data, size, [](std::string_view t) { return decode_killed(t); }); break;
        case 10: check(data, size, [](std::string_view t) { return decode_sent(t); }); break;
        case 11: check(data, size, [](std::string_view t) { return decode_dropped(t); }); break;
        case 12: {
            // SEND is binary: an id, then input. Accepted means both, and nothing is lost.
            const auto d = decode_send(std::span(data, size));
            if (!d) {
                if (d.error.empty()) ptyvisor::fuzz::fail("refused without a reason");
                break;
            }
            if (!is_session_id(d.value->id)) ptyvisor::fuzz::fail("SEND accepted a bad id");
            if (d.value->input.empty() || d.value->id.size() + d.value->input.size() != size)
                ptyvisor::fuzz::fail("SEND lost bytes");
            break;
        }
        // Version 4.
        case 13: check(data, size, [](std::string_view t) { return decode_commands(t); }); break;
        case 14: check(data, size, [](std::string_view t) { return decode_command_list(t); }); break;
        case 15: check(data, size, [](std::string_view t) { return decode_exec(t); }); break;
        case 16: check(data, size, [](std::string_view t) { return decode_executed(t); }); break;
        case 17: check(data, size, [](std::string_view t) { return decode_watch(t); }); break;
        case 18: check(data, size, [](std::string_view t) { return decode_event(t); }); break;
        case 19: check(data, size, [](std::string_view t) { return decode_command_record(t); }); break;
        // Version 5.
        case 20: check(data, size, [](std::string_view t) { return decode_control(t); }); break;
        case 21: check(data, size, [](std::string_view t) { return decode_controller(t); }); break;
        case 22: check(data, size, [](std::string_view t) { return decode_refused(t); }); break;
        case 23: check(data, size, [](std::string_view t) { return decode_recording(t); }); break;
        case 24: check(data, size, [](std::string_view t) { return decode_cast(t); }); break;
    }
    return 0;
}
