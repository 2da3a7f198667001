#include "web/listen_address.h"

#include <charconv>
#include <string_view>

namespace ptyvisor::web {

bool parse_listen(const std::string& text, std::string& host, std::uint16_t& port, std::string& why) {
    std::string_view rest(text), port_text;
    if (rest.starts_with('[')) {
        const auto close = rest.find("]:");
        if (close == std::string_view::npos) {
            why = "--listen: expected [IPV6]:PORT";
            return false;
        }
        host = std::string(rest.substr(1, close - 1));
        port_text = rest.substr(close + 2);
    } else {
        const auto colon = rest.rfind(':');
        if (colon == std::string_view::npos || rest.find(':') != colon) {
            why = "--listen: expected HOST:PORT (an IPv6 address in brackets)";
            return false;
        }
        host = std::string(rest.substr(0, colon));
        port_text = rest.substr(colon + 1);
    }
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (host.empty() || port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
        value > 65535) {
        why = "--listen: expected HOST:PORT with PORT 0..65535";
        return false;
    }
    port = static_cast<std::uint16_t>(value);
    return true;
}

}  // namespace ptyvisor::web
