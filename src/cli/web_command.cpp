#include "cli/web_command.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "cli/options.h"
#include "client/default_socket.h"
#include "web/messages.h"
#include "web/server.h"
#include "web/token.h"

namespace ptyvisor::cli {

namespace {

constexpr int kRefused = 2;

int refuse(const std::string& why) {
    std::fprintf(stderr, "ptyvisor web: %s\n", why.c_str());
    return kRefused;
}

}  // namespace

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

int web_command(const WebOptions& options) {
    // The console acts with its caller's rights on the daemon: root would make every page
    // that has the token root's observer, and root never needs a browser for that.
    if (::getuid() == 0 || ::geteuid() == 0) return refuse("runs as the person who supervises, never as root");

    web::ServerConfig config;
    config.uid = ::getuid();
    config.user = web::system_user_name(config.uid);
    config.version = "ptyvisor " + options.version;
    config.daemon_socket = resolve_socket_path(options.socket, std::getenv(client::kSocketEnvironmentVariable));
    std::string why;
    if (options.unix_path && options.listen) return refuse("--listen and --unix exclude each other");
    if (options.unix_path) {
        config.unix_socket = true;
        config.unix_path = *options.unix_path;
    } else if (options.listen && !parse_listen(*options.listen, config.listen_host, config.port, why)) {
        return refuse(why);
    }
    if (options.token_file) {
        if (!web::read_token_file(*options.token_file, config.uid, config.token, why)) return refuse(why);
    } else if (!web::generate_token(config.token, why)) {
        return refuse(why);
    }
    return web::serve(config);
}

}  // namespace ptyvisor::cli
