#include "web/messages.h"

#include <pwd.h>
#include <unistd.h>

#include <vector>

namespace ptyvisor::web {

using nlohmann::json;

SessionRow row_from(const protocol::SessionInfo& info) {
    SessionRow row;
    row.id = info.id;
    row.argv = info.argv;
    row.cwd = info.cwd;
    row.state = info.state;
    row.exit = info.exit;
    row.created = info.created;
    row.clients = info.clients;
    row.detached = info.detached;
    row.start = info.start;
    row.offset = info.offset;
    row.waiting_for_input = info.waiting_for_input;
    row.at_prompt = info.at_prompt;
    row.shell = info.shell;
    if (info.last_command) {
        const auto& c = *info.last_command;
        row.last_command = LastCommand{c.seq, c.command, c.exit_code, !c.ended()};
    }
    // Protocol version 5: who holds the terminal, and whether a recording exists.
    row.controller.held = info.held;
    row.controller.uid = info.controller_uid;
    row.controller.since_ms = info.controller_since;
    row.recording = info.recording;
    return row;
}

std::string system_user_name(std::int64_t uid) {
    if (uid < 0 || uid > 0xfffffffe) return std::to_string(uid);
    long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
    std::vector<char> buffer(size > 0 ? static_cast<std::size_t>(size) : 16384);
    struct passwd pw {};
    struct passwd* result = nullptr;
    if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buffer.data(), buffer.size(), &result) != 0 || result == nullptr)
        return std::to_string(uid);
    return pw.pw_name;
}

json exit_json(const protocol::ExitStatus& status) {
    return json::parse(protocol::encode(status), nullptr, /*allow_exceptions=*/false);
}

namespace {

void put_controller(json& j, const ControllerView& c, const UserNamer& names, std::string_view since_key) {
    j["controller"] = c.held ? "supervisor" : "agent";
    if (c.held && c.uid) j["controller_user"] = names(*c.uid);
    else j["controller_user"] = nullptr;
    if (c.held && c.since_ms) j[std::string(since_key)] = *c.since_ms;
    else j[std::string(since_key)] = nullptr;
}

}  // namespace

json session_json(const SessionRow& row, const UserNamer& names) {
    json j;
    j["id"] = row.id;
    j["argv"] = row.argv;
    j["cwd"] = row.cwd;
    j["state"] = std::string(protocol::to_string(row.state));
    j["exit"] = row.exit ? exit_json(*row.exit) : json(nullptr);
    j["created"] = row.created;
    j["clients"] = row.clients;
    j["detached"] = row.detached;
    j["start"] = row.start;
    j["offset"] = row.offset;
    if (row.state == protocol::State::Exited) {
        // Nobody controls a terminal that is gone.
        j["controller"] = nullptr;
        j["controller_user"] = nullptr;
        j["controller_since"] = nullptr;
    } else {
        put_controller(j, row.controller, names, "controller_since");
    }
    j["waiting_for_input"] = row.waiting_for_input;
    j["at_prompt"] = row.at_prompt;
    j["shell"] = row.shell ? json(*row.shell) : json(nullptr);
    if (row.last_command) {
        const auto& c = *row.last_command;
        j["last_command"] = {{"seq", c.seq},
                             {"command", c.command},
                             {"exit_code", c.exit_code ? json(*c.exit_code) : json(nullptr)},
                             {"running", c.running}};
    } else {
        j["last_command"] = nullptr;
    }
    j["recording"] = row.recording;
    return j;
}

std::string sessions_document(const std::vector<SessionRow>& rows, std::string_view role, const UserNamer& names,
                              std::string_view type) {
    json j = json::object();
    if (!type.empty()) j["type"] = type;
    json list = json::array();
    for (const auto& r : rows) list.push_back(session_json(r, names));
    j["sessions"] = std::move(list);
    j["role"] = role;
    // Session text (argv, cwd, commands) is the session's and may hold invalid UTF-8: replace.
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string unavailable_message(std::string_view message) {
    return json{{"type", "unavailable"}, {"message", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool role_may_control(std::string_view role) { return role == "supervisor" || role == "root"; }

std::string info_document(std::string_view user, std::int64_t uid, std::string_view role, std::string_view version) {
    json j = {{"user", user}, {"uid", uid}, {"role", role}, {"may_control", role_may_control(role)},
              {"version", version}};
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string attached_message(const AttachedView& v, bool you, const UserNamer& names) {
    json j;
    j["type"] = "attached";
    j["id"] = v.id;
    j["offset"] = v.offset;
    j["size"] = {{"cols", v.cols}, {"rows", v.rows}};
    j["state"] = std::string(protocol::to_string(v.state));
    j["may_control"] = v.may_control;
    put_controller(j, v.controller, names, "controller_since");
    j["you"] = you;
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string controller_message(const ControllerView& v, bool you, const UserNamer& names) {
    json j;
    j["type"] = "controller";
    put_controller(j, v, names, "since");
    j["you"] = you;
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string dropped_message(std::uint64_t offset, std::uint64_t lost) {
    return json{{"type", "dropped"}, {"offset", offset}, {"lost", lost}}.dump();
}

std::string screen_message(const ScreenView& v) {
    return json{{"type", "screen"}, {"offset", v.offset}, {"size", {{"cols", v.cols}, {"rows", v.rows}}},
                {"data", v.data}, {"streaming", v.streaming}, {"skipped", v.skipped}}
        .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string refused_message(std::string_view code, std::string_view message) {
    return json{{"type", "refused"}, {"code", code}, {"message", message}}.dump(-1, ' ', false,
                                                                                  json::error_handler_t::replace);
}

std::string exit_message(const protocol::ExitStatus& status) {
    return json{{"type", "exit"}, {"exit", exit_json(status)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_message(std::string_view code, std::string_view message) {
    return json{{"type", "error"}, {"code", code}, {"message", message}}.dump(-1, ' ', false,
                                                                                json::error_handler_t::replace);
}

PageMessage parse_page_message(std::string_view text) {
    // Depth is bounded: no request nests, so anything past depth 2 is refused while parsing.
    const auto limit = [](int depth, json::parse_event_t, json&) { return depth <= 2; };
    const json j = json::parse(text, limit, /*allow_exceptions=*/false);
    if (!j.is_object()) return InvalidMessage{"not a JSON object"};
    const auto type = j.find("type");
    if (type == j.end() || !type->is_string()) return InvalidMessage{"no \"type\""};
    const auto& t = type->get_ref<const std::string&>();
    if (t == "input") {
        const auto data = j.find("data");
        if (data == j.end() || !data->is_string()) return InvalidMessage{"input without a \"data\" string"};
        return InputMessage{data->get<std::string>()};
    }
    if (t == "take") return TakeMessage{};
    if (t == "release") return ReleaseMessage{};
    if (t == "resize") {
        const auto cols = j.find("cols"), rows = j.find("rows");
        if (cols == j.end() || rows == j.end() || !cols->is_number_unsigned() || !rows->is_number_unsigned())
            return InvalidMessage{"resize needs \"cols\" and \"rows\""};
        const auto c = cols->get<std::uint64_t>(), r = rows->get<std::uint64_t>();
        if (c < 1 || c > kMaxTerminalSide || r < 1 || r > kMaxTerminalSide)
            return InvalidMessage{"resize: cols and rows are 1..1000"};
        return ResizeMessage{static_cast<std::uint16_t>(c), static_cast<std::uint16_t>(r)};
    }
    return InvalidMessage{"unknown type \"" + t + "\""};
}

}  // namespace ptyvisor::web
