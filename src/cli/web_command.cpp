#include "cli/web_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/options.h"
#include "client/default_socket.h"
#include "web/listen_address.h"
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
    } else if (options.listen && !web::parse_listen(*options.listen, config.listen_host, config.port, why)) {
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
