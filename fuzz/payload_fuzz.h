// Shared body of the payload fuzz targets.
//
// Properties checked on every input, besides "no crash, no sanitizer report":
//   - a refusal always carries a reason;
//   - an accepted value re-encodes to text that decodes to the very same value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "protocol/payloads.h"

namespace ptyvisor::fuzz {

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
    std::abort();
}

template <class Decode>
void check_payload(const std::uint8_t* data, std::size_t size, Decode decode) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto first = decode(text);
    if (!first) {
        if (first.error.empty()) fail("refused without a reason");
        return;
    }
    const auto again = decode(protocol::encode(*first.value));
    if (!again) fail("encode() produced text its decoder refuses");
    if (!(*again.value == *first.value)) fail("round trip changed the value");
}

}  // namespace ptyvisor::fuzz
