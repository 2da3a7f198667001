// What an HTTP request to the console must show before anything is served: the right Host
// (DNS rebinding), the token (query or cookie), and for a WebSocket an Origin of that same
// host. Pure functions over header values, so that every rule is tested without a socket.
// docs/console-api.md, "Authentication", is the contract.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "web/routes.h"

namespace ptyvisor::web {

// The name of the cookie that carries the token after the first visit.
inline constexpr std::string_view kTokenCookie = "ptyvisor_token";

// A request target split at its first '?'.
struct Target {
    std::string_view path;
    std::string_view query;
};
Target split_target(std::string_view target);

// The value of parameter `name` in a query string ("a=1&b=2"), percent-decoded ('+' is a
// space). nullopt when absent or when its escapes are malformed. The first occurrence wins.
std::optional<std::string> query_param(std::string_view query, std::string_view name);

// The value of cookie `name` in a Cookie header ("a=1; b=2"). The first occurrence wins.
std::optional<std::string_view> cookie_value(std::string_view header, std::string_view name);

// Which Host values a request may carry. For TCP: 127.0.0.1:PORT, localhost:PORT,
// [::1]:PORT and the HOST:PORT given to --listen (letters compared without case). Behind a
// Unix socket a reverse proxy sets Host, so any is accepted.
struct HostRule {
    bool unix_socket = false;
    std::uint16_t port = 0;
    std::string listen_host;  // as given to --listen ("127.0.0.1", "::1", a name)
};
bool host_allowed(std::string_view host, const HostRule& rule);

// Whether a WebSocket upgrade's Origin ("http://h:p" or "https://h:p", nothing after) names the
// same host[:port] as the request's Host header. A missing Origin (empty) or "null" is refused.
bool origin_matches_host(std::string_view origin, std::string_view host);

// Everything the decision needs from one request's start line and headers.
struct RequestFacts {
    std::string_view method;      // "GET", ...
    std::string_view target;      // "/path?query"
    std::string_view host;        // the Host header, "" when absent
    std::string_view origin;      // the Origin header, "" when absent
    std::string_view cookie;      // the Cookie header, "" when absent
    bool websocket_upgrade = false;
};

struct Decision {
    enum class Kind {
        Serve,               // route says what
        SetCookieAndRedirect,  // 303 to "/" with the token cookie
        BadHost,             // 403
        NoToken,             // 403 with the "needs the token" text
        BadOrigin,           // 403 before a WebSocket upgrade
        MethodNotAllowed,    // 405
        NotFound,            // 404
        NotWebSocket,        // 426: a /ws/ route asked without an upgrade
        BadRequest,          // 400: e.g. /ws/terminal without a valid id
    };
    Kind kind = Kind::NotFound;
    Route route;
};

// The order is the security order: Host first (a rebinding page learns nothing, not even
// whether a token is right), then the token, then method and route, then Origin.
Decision decide(const RequestFacts& facts, std::string_view token, const HostRule& hosts);

}  // namespace ptyvisor::web
