// The console's routes and the content types of its files (docs/console-api.md, "HTTP routes").
#pragma once

#include <string>
#include <string_view>

namespace ptyvisor::web {

struct Route {
    enum class Kind { NotFound, Index, Asset, Info, Sessions, Recording, EventsSocket, TerminalSocket };
    Kind kind = Kind::NotFound;
    std::string argument;  // Asset: the file's name under assets/; Recording, TerminalSocket: the session id
    bool operator==(const Route&) const = default;
};

// The route of a path (no query), and for /ws/terminal its query's id. An /ws/terminal with
// no valid session id, or a recording path whose id is not one, is NotFound.
Route route_for(std::string_view path, std::string_view query);

// The Content-Type of an embedded file by its extension; application/octet-stream otherwise.
std::string_view content_type_for(std::string_view name);

// Whether a route is answered with a WebSocket.
inline bool is_socket_route(const Route& r) {
    return r.kind == Route::Kind::EventsSocket || r.kind == Route::Kind::TerminalSocket;
}

}  // namespace ptyvisor::web
