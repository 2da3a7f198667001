// --listen HOST:PORT, parsed: "127.0.0.1:8650", "localhost:0", "[::1]:8650".
#pragma once

#include <cstdint>
#include <string>

namespace ptyvisor::web {

// Sets `host` (an IPv6 literal without its brackets) and `port` (0..65535); false with `why`.
bool parse_listen(const std::string& text, std::string& host, std::uint16_t& port, std::string& why);

}  // namespace ptyvisor::web
