#include "web/request_rules.h"

#include "web/token.h"

namespace ptyvisor::web {

namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool equal_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<std::string> percent_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '+') {
            out.push_back(' ');
        } else if (c == '%') {
            if (i + 2 >= text.size()) return std::nullopt;
            const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// "[::1]:8650" -> host "[::1]", port "8650"; "localhost:80" -> "localhost", "80". A Host with no
// port, or an IPv6 literal without brackets, gives an empty port.
void split_host_port(std::string_view hostport, std::string_view& host, std::string_view& port) {
    host = hostport;
    port = {};
    if (hostport.starts_with('[')) {
        const auto close = hostport.find(']');
        if (close == std::string_view::npos) return;
        host = hostport.substr(0, close + 1);
        const auto rest = hostport.substr(close + 1);
        if (rest.starts_with(':')) port = rest.substr(1);
        else if (!rest.empty()) host = hostport;  // junk after ']': compared whole, matches nothing
        return;
    }
    const auto colon = hostport.rfind(':');
    if (colon == std::string_view::npos || hostport.find(':') != colon) return;
    host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
}

}  // namespace

Target split_target(std::string_view target) {
    const auto q = target.find('?');
    if (q == std::string_view::npos) return {target, {}};
    return {target.substr(0, q), target.substr(q + 1)};
}

std::optional<std::string> query_param(std::string_view query, std::string_view name) {
    while (!query.empty()) {
        const auto amp = query.find('&');
        const auto pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        const auto eq = pair.find('=');
        const auto key = pair.substr(0, eq);
        if (key != name) continue;
        return percent_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1));
    }
    return std::nullopt;
}

std::optional<std::string_view> cookie_value(std::string_view header, std::string_view name) {
    while (!header.empty()) {
        const auto semi = header.find(';');
        const auto pair = trim(header.substr(0, semi));
        header = semi == std::string_view::npos ? std::string_view{} : header.substr(semi + 1);
        const auto eq = pair.find('=');
        if (eq == std::string_view::npos) continue;
        if (trim(pair.substr(0, eq)) != name) continue;
        auto value = trim(pair.substr(eq + 1));
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
        return value;
    }
    return std::nullopt;
}

bool host_allowed(std::string_view host, const HostRule& rule) {
    if (rule.unix_socket) return true;
    std::string_view name, port;
    split_host_port(host, name, port);
    if (port != std::to_string(rule.port)) return false;
    if (name == "127.0.0.1" || equal_ignoring_case(name, "localhost") || name == "[::1]") return true;
    if (rule.listen_host.empty()) return false;
    // --listen ::1:PORT or [::1]:PORT: the Host header always brackets an IPv6 literal.
    const std::string listen = rule.listen_host.find(':') != std::string::npos && !rule.listen_host.starts_with('[')
                                   ? "[" + rule.listen_host + "]"
                                   : rule.listen_host;
    return equal_ignoring_case(name, listen);
}

bool origin_matches_host(std::string_view origin, std::string_view host) {
    std::string_view rest;
    if (origin.starts_with("http://")) rest = origin.substr(7);
    else if (origin.starts_with("https://")) rest = origin.substr(8);
    else return false;  // "null", missing, or another scheme
    if (rest.empty() || host.empty()) return false;
    if (rest.find_first_of("/?#@ ") != std::string_view::npos) return false;
    return equal_ignoring_case(rest, host);
}

Decision decide(const RequestFacts& facts, std::string_view token, const HostRule& hosts) {
    using K = Decision::Kind;
    if (!host_allowed(facts.host, hosts)) return {K::BadHost, {}};

    const auto target = split_target(facts.target);
    const auto from_query = query_param(target.query, "token");
    const auto from_cookie = cookie_value(facts.cookie, kTokenCookie);
    const bool query_ok = from_query && tokens_equal(*from_query, token);
    const bool cookie_ok = from_cookie && tokens_equal(*from_cookie, token);
    if (!query_ok && !cookie_ok) return {K::NoToken, {}};

    if (facts.method != "GET") return {K::MethodNotAllowed, {}};
    Route route = route_for(target.path, target.query);
    if (route.kind == Route::Kind::NotFound) {
        // A /ws/terminal whose id is missing or malformed is a bad request, not a missing page.
        if (target.path == "/ws/terminal") return {K::BadRequest, {}};
        return {K::NotFound, {}};
    }
    if (is_socket_route(route)) {
        if (!facts.websocket_upgrade) return {K::NotWebSocket, route};
        if (!origin_matches_host(facts.origin, facts.host)) return {K::BadOrigin, route};
        return {K::Serve, route};
    }
    // The token leaves the address bar (and the history) for a cookie, as Jupyter does.
    if (route.kind == Route::Kind::Index && query_ok) return {K::SetCookieAndRedirect, route};
    return {K::Serve, route};
}

}  // namespace ptyvisor::web
