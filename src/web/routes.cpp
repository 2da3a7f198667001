#include "web/routes.h"

#include "protocol/session_payloads.h"
#include "web/request_rules.h"

namespace ptyvisor::web {

Route route_for(std::string_view path, std::string_view query) {
    using K = Route::Kind;
    if (path == "/") return {K::Index, "index.html"};
    if (path == "/api/info") return {K::Info, {}};
    if (path == "/api/sessions") return {K::Sessions, {}};
    if (path == "/ws/events") return {K::EventsSocket, {}};
    if (path == "/ws/terminal") {
        const auto id = query_param(query, "id");
        if (!id || !protocol::is_session_id(*id)) return {};
        return {K::TerminalSocket, *id};
    }
    constexpr std::string_view kAssets = "/assets/";
    if (path.starts_with(kAssets) && path.size() > kAssets.size()) return {K::Asset, std::string(path.substr(kAssets.size()))};
    constexpr std::string_view kSessions = "/api/sessions/";
    constexpr std::string_view kRecording = "/recording";
    if (path.starts_with(kSessions) && path.ends_with(kRecording) && path.size() > kSessions.size() + kRecording.size()) {
        const auto id = path.substr(kSessions.size(), path.size() - kSessions.size() - kRecording.size());
        if (protocol::is_session_id(id)) return {K::Recording, std::string(id)};
    }
    return {};
}

std::string_view content_type_for(std::string_view name) {
    struct Entry {
        std::string_view extension, type;
    };
    static constexpr Entry kTypes[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"}, {".woff2", "font/woff2"}, {".json", "application/json"},
        {".png", "image/png"}, {".ico", "image/x-icon"}, {".map", "application/json"},
    };
    for (const auto& e : kTypes)
        if (name.ends_with(e.extension)) return e.type;
    return "application/octet-stream";
}

}  // namespace ptyvisor::web
