// libFuzzer target: decode_status() on arbitrary bytes (see payload_fuzz.h for the invariants).
#include "payload_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    ptyvisor::fuzz::check_payload(data, size, [](std::string_view text) {
        return ptyvisor::protocol::decode_status(text);
    });
    return 0;
}
