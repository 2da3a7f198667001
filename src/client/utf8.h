// UTF-8 validation. Control payloads are JSON, and JSON strings are Unicode: bytes that are
// not valid UTF-8 cannot be carried faithfully, so the client refuses them up front instead
// of letting the encoder substitute U+FFFD behind the caller's back.
#pragma once

#include <string_view>

namespace ptyvisor::client {

// True when `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool is_valid_utf8(std::string_view text);

}  // namespace ptyvisor::client
