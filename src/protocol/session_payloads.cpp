#include "protocol/session_payloads.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "protocol/json_members.h"

namespace ptyvisor::protocol {
namespace {

using nlohmann::json;

using json_members::dump;

std::optional<json> parse(std::string_view text, int max_depth, std::string& why) {
    return json_members::parse_object(text, max_depth, why);
}

// Member readers: false with `why` when the member is missing (and required) or wrong.
struct Reader : json_members::MemberReader {
    bool id(std::string& out) {
        if (!str("id", out, kSessionIdLength)) return false;
        if (!is_session_id(out)) return fail("id", "must be 32 lowercase hex digits");
        return true;
    }
    bool position(const char* key, LogPosition& out) {
        const json* v = find(key, false);
        if (!v) return true;
        if (v->is_string() && *v == "start") out = {LogPosition::Kind::Start, 0};
        else if (v->is_string() && *v == "tail") out = {LogPosition::Kind::Tail, 0};
        else if (v->is_number_unsigned()) out = {LogPosition::Kind::Offset, v->get<std::uint64_t>()};
        else return fail(key, "must be \"start\", \"tail\" or an offset");
        return true;
    }
    bool state(State& out) {
        std::string s;
        if (!str("state", s, 16)) return false;
        if (s == "starting") out = State::Starting;
        else if (s == "running") out = State::Running;
        else if (s == "exited") out = State::Exited;
        else return fail("state", "is unknown");
        return true;
    }
    bool exit(std::optional<ExitStatus>& out) {
        const json* v = find("exit", false);
        if (!v || v->is_null()) return true;
        if (!v->is_object()) return fail("exit", "must be an object or null");
        auto decoded = decode_exit(dump(*v));
        if (!decoded) return fail("exit", "is not an exit status");
        out = std::move(*decoded.value);
        return true;
    }
};

json position_json(const LogPosition& p) {
    switch (p.kind) {
        case LogPosition::Kind::Start: return "start";
        case LogPosition::Kind::Tail: return "tail";
        case LogPosition::Kind::Offset: return p.offset;
    }
    return "start";
}

json exit_json(const std::optional<ExitStatus>& exit) { return exit ? json::parse(encode(*exit)) : json(nullptr); }

// The usage members in one order, for the encoder and the decoder alike.
template <class Usage, class F>
void for_each_usage_member(Usage& u, F f) {
    f("cpu_usec", u.cpu_usec);
    f("memory_current", u.memory_current);
    f("memory_peak", u.memory_peak);
    f("tasks_current", u.tasks_current);
    f("tasks_peak", u.tasks_peak);
    f("oom_kills", u.oom_kills);
    f("tasks_limit_hits", u.tasks_limit_hits);
    f("io_read_bytes", u.io_read_bytes);
    f("io_write_bytes", u.io_write_bytes);
}

json usage_json(const UsageInfo& usage) {
    json j = json::object();
    for_each_usage_member(usage, [&](const char* name, const std::optional<std::uint64_t>& v) {
        if (v) j[name] = *v;
    });
    return j;
}

json size_json(const WindowSize& s) { return {{"cols", s.cols}, {"rows", s.rows}}; }

// Version 5: "controller" is "supervisor" (with who and since when) while a person holds the
// terminal; absent, or "agent", otherwise.
bool read_controller(Reader& r, bool& held, std::optional<std::int64_t>& uid, std::optional<std::int64_t>& since) {
    std::string controller;
    if (!r.str("controller", controller, 16, false)) return false;
    held = controller == "supervisor";
    if (!held) return true;
    std::int64_t id = 0, ms = 0;
    if (r.find("controller_uid", false)) {
        if (!r.i64("controller_uid", id)) return false;
        uid = id;
    }
    if (r.find("controller_since", false)) {
        if (!r.i64("controller_since", ms)) return false;
        since = ms;
    }
    return true;
}

// Decodes `text` as an object of at most `depth` nested levels and reads it with `read`.
template <class T, class F>
Decoded<T> decode_with(std::string_view text, int depth, F read) {
    std::string why;
    const auto o = parse(text, depth, why);
    if (!o) return Decoded<T>::fail(why);
    T v{};
    Reader r{{*o, why}};
    if (!read(r, v)) return Decoded<T>::fail(why);
    return {std::move(v), {}};
}

}  // namespace

bool is_session_id(std::string_view id) {
    return id.size() == kSessionIdLength &&
           std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string_view to_string(State state) {
    switch (state) {
        case State::Starting: return "starting";
        case State::Running: return "running";
        case State::Exited: return "exited";
    }
    return "exited";
}

// ---- Encoders --------------------------------------------------------------------------

std::string encode(const AttachRequest& v) {
    json j{{"id", v.id}, {"from", position_json(v.from)}, {"role", v.observe ? "observer" : "controller"},
           {"takeover", v.takeover}};
    if (v.terminal) j["terminal"] = true;  // version 3
    return dump(j);
}

std::string encode(const AttachedReply& v) {
    json j{{"id", v.id}, {"unit", v.unit}, {"pid", v.pid}, {"role", v.observe ? "observer" : "controller"},
           {"start", v.start}, {"end", v.end}, {"offset", v.offset}, {"state", to_string(v.state)},
           {"size", size_json(v.size)}};
    if (v.may_control) j["may_control"] = true;
    if (v.held) {
        j["controller"] = "supervisor";
        if (v.controller_uid) j["controller_uid"] = *v.controller_uid;
        if (v.controller_since) j["controller_since"] = *v.controller_since;
    }
    return dump(j);
}

std::string encode(const DetachedReply& v) { return dump({{"offset", v.offset}, {"reason", v.reason}}); }

std::string encode(const std::vector<SessionInfo>& sessions, bool truncated) {
    std::vector<std::string> entries;
    entries.reserve(sessions.size());
    for (const auto& s : sessions) entries.push_back(session_entry(session_fixed_fields(s), s));
    return encode_sessions(entries, truncated);
}

std::string session_fixed_fields(const SessionInfo& v) {
    json j{{"id", v.id}, {"unit", v.unit}, {"argv", v.argv}, {"cwd", v.cwd}, {"created", v.created}};
    if (!v.profile.empty()) j["profile"] = v.profile;
    return dump(j);
}

std::string session_entry(std::string_view fixed_fields, const SessionInfo& v) {
    json j{{"state", to_string(v.state)}, {"exit", exit_json(v.exit)}, {"pid", v.pid}, {"start", v.start},
           {"offset", v.offset}, {"clients", v.clients}, {"detached", v.detached}};
    // Version 4's members only where they say something (an absent one is null or false): a
    // LIST of sessions without a shell that reports commands costs what it did.
    if (v.shell) j["shell"] = *v.shell;
    if (v.at_prompt) j["at_prompt"] = true;
    if (v.waiting_for_input) j["waiting_for_input"] = true;
    if (v.waiting_since) j["waiting_since"] = *v.waiting_since;
    if (v.last_command) j["last_command"] = json::parse(encode(*v.last_command));
    if (v.held) {
        j["controller"] = "supervisor";
        if (v.controller_uid) j["controller_uid"] = *v.controller_uid;
        if (v.controller_since) j["controller_since"] = *v.controller_since;
    }
    if (v.recording) j["recording"] = true;
    if (v.usage) j["usage"] = usage_json(*v.usage);
    const std::string changing = dump(j);
    // Two non-empty objects "{a}" and "{b}" become "{a,b}".
    std::string entry;
    entry.reserve(fixed_fields.size() + changing.size());
    entry.append(fixed_fields.substr(0, fixed_fields.size() - 1));
    entry.push_back(',');
    entry.append(std::string_view(changing).substr(1));
    return entry;
}

std::string encode_sessions(const std::vector<std::string>& entries, bool truncated,
                            const std::optional<std::string>& role) {
    std::size_t size = 32;
    for (const auto& e : entries) size += e.size() + 1;
    std::string out;
    out.reserve(size);
    out.append(R"({"sessions":[)");
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (i) out.push_back(',');
        out.append(entries[i]);
    }
    out.append(truncated ? R"(],"truncated":true)" : "]");
    if (role) out.append(R"(,"role":)").append(dump(json(*role)));
    out.push_back('}');
    return out;
}

std::string encode(const ReadRequest& v) {
    return dump({{"id", v.id}, {"from", position_json(v.from)}, {"max_bytes", v.max_bytes}});
}

std::string encode(const LogReply& v) {
    return dump({{"id", v.id}, {"start", v.start}, {"offset", v.offset}, {"length", v.length}, {"end", v.end},
                 {"state", to_string(v.state)}, {"exit", exit_json(v.exit)}});
}

std::string encode(const WaitRequest& v) {
    json j{{"id", v.id}, {"timeout_ms", v.timeout_ms}};
    switch (v.what) {
        case WaitRequest::For::Exit: j["for"] = "exit"; break;
        case WaitRequest::For::Quiet:
            j["for"] = "quiet";
            j["quiet_ms"] = v.quiet_ms;
            break;
        case WaitRequest::For::Text:
            j["for"] = "text";
            j["pattern"] = v.pattern;
            j["from"] = position_json(v.from);
            break;
        case WaitRequest::For::Command:
            j["for"] = "command";
            if (v.after) j["after"] = *v.after;
            break;
        case WaitRequest::For::Prompt: j["for"] = "prompt"; break;
        case WaitRequest::For::Input: j["for"] = "input"; break;
    }
    return dump(j);
}

std::string encode(const WaitReply& v) {
    json j{{"matched", v.matched}, {"reason", v.reason}, {"state", to_string(v.state)},
           {"exit", exit_json(v.exit)}, {"offset", v.offset}};
    if (v.reason == "text") {
        j["match_start"] = v.match_start;
        j["match_end"] = v.match_end;
    }
    if (v.command) j["command"] = json::parse(encode(*v.command));
    return dump(j);
}

std::string encode(const KillRequest& v) { return dump({{"id", v.id}, {"signal", v.signal}}); }

std::string encode(const KillReply& v) {
    return dump({{"id", v.id}, {"state", to_string(v.state)}, {"exit", exit_json(v.exit)}});
}

std::string encode(const SentReply& v) { return dump({{"bytes", v.bytes}}); }

std::string encode(const DroppedNotice& v) { return dump({{"offset", v.offset}, {"lost", v.lost}}); }

std::vector<std::uint8_t> encode_send(std::string_view id, std::span<const std::uint8_t> input) {
    std::vector<std::uint8_t> out(id.begin(), id.end());
    out.insert(out.end(), input.begin(), input.end());
    return out;
}

// ---- Decoders --------------------------------------------------------------------------

Decoded<AttachRequest> decode_attach(std::string_view text) {
    return decode_with<AttachRequest>(text, 0, [](Reader& r, AttachRequest& v) {
        std::string role = "controller";
        if (!r.id(v.id) || !r.position("from", v.from) || !r.str("role", role, 16, false) ||
            !r.boolean("takeover", v.takeover, false) || !r.boolean("terminal", v.terminal, false))
            return false;
        if (role != "controller" && role != "observer") return r.fail("role", "must be \"controller\" or \"observer\"");
        v.observe = role == "observer";
        return true;
    });
}

Decoded<AttachedReply> decode_attached(std::string_view text) {
    return decode_with<AttachedReply>(text, 1, [](Reader& r, AttachedReply& v) {
        std::string role;
        std::uint64_t cols = 80, rows = 24;
        if (!r.id(v.id) || !r.str("unit", v.unit, 256) || !r.i64("pid", v.pid) || !r.str("role", role, 16) ||
            !r.u64("start", v.start, UINT64_MAX) || !r.u64("end", v.end, UINT64_MAX) ||
            !r.u64("offset", v.offset, UINT64_MAX) || !r.state(v.state))
            return false;
        v.observe = role == "observer";
        if (const json* size = r.find("size", false)) {
            // An optional member of the wrong type is an error (docs/protocol.md, section 3).
            if (!size->is_object()) return r.fail("size", "must be an object");
            Reader s{*size, r.why};
            if (!s.u64("cols", cols, 0xffff) || !s.u64("rows", rows, 0xffff)) return false;
            v.size = {static_cast<std::uint16_t>(rows), static_cast<std::uint16_t>(cols)};
        }
        // Version 5's members, absent from older daemons' replies.
        if (!r.boolean("may_control", v.may_control, false)) return false;
        return read_controller(r, v.held, v.controller_uid, v.controller_since);
    });
}

Decoded<DetachedReply> decode_detached(std::string_view text) {
    return decode_with<DetachedReply>(text, 0, [](Reader& r, DetachedReply& v) {
        return r.u64("offset", v.offset, UINT64_MAX) && r.str("reason", v.reason, 32);
    });
}

Decoded<std::vector<SessionInfo>> decode_sessions(std::string_view text) {
    auto reply = decode_sessions_reply(text);
    if (!reply) return Decoded<std::vector<SessionInfo>>::fail(reply.error);
    return {std::move(reply.value->sessions), {}};
}

Decoded<SessionsReply> decode_sessions_reply(std::string_view text) {
    return decode_with<SessionsReply>(text, 3, [](Reader& r, SessionsReply& reply) {
        auto& out = reply.sessions;
        if (!r.boolean("truncated", reply.truncated, false)) return false;
        if (r.find("role", false)) {
            std::string role;
            if (!r.str("role", role, 16)) return false;
            reply.role = std::move(role);
        }
        const json* list = r.find("sessions", true);
        if (!list) return false;
        if (!list->is_array()) return r.fail("sessions", "must be an array");
        for (const json& item : *list) {
            if (!item.is_object()) return r.fail("sessions", "must hold objects");
            Reader s{item, r.why};
            SessionInfo v;
            std::uint64_t clients = 0;
            if (!s.id(v.id) || !s.str("unit", v.unit, 256) || !s.str("cwd", v.cwd, 4096, false) || !s.state(v.state) ||
                !s.exit(v.exit) || !s.i64("pid", v.pid, false) || !s.u64("start", v.start, UINT64_MAX) ||
                !s.u64("offset", v.offset, UINT64_MAX) || !s.u64("clients", clients, 0xffffffff) ||
                !s.i64("created", v.created) || !s.boolean("detached", v.detached, false))
                return false;
            v.clients = static_cast<std::uint32_t>(clients);
            // Version 4's members, absent from older daemons' replies.
            if (!s.boolean("at_prompt", v.at_prompt, false) || !s.boolean("waiting_for_input", v.waiting_for_input, false))
                return false;
            if (const json* shell = s.find("shell", false); shell && !shell->is_null()) {
                std::string name;
                if (!s.str("shell", name, 16)) return false;
                v.shell = std::move(name);
            }
            if (const json* since = s.find("waiting_since", false); since && since->is_number_integer())
                v.waiting_since = since->get<std::int64_t>();
            if (const json* last = s.find("last_command", false); last && last->is_object()) {
                auto decoded = decode_command_record(dump(*last));
                if (!decoded) return s.fail("last_command", "is not a command record");
                v.last_command = std::move(*decoded.value);
            }
            if (!read_controller(s, v.held, v.controller_uid, v.controller_since) ||
                !s.boolean("recording", v.recording, false))
                return false;
            // Version 6's members.
            if (!s.str("profile", v.profile, kMaxProfileNameLength, false)) return false;
            if (const json* usage = s.find("usage", false); usage && !usage->is_null()) {
                if (!usage->is_object()) return s.fail("usage", "must be an object");
                UsageInfo u;
                bool ok = true;
                for_each_usage_member(u, [&](const char* name, std::optional<std::uint64_t>& field) {
                    const auto it = usage->find(name);
                    if (it == usage->end() || it->is_null()) return;
                    if (!it->is_number_unsigned()) ok = false;
                    else field = it->get<std::uint64_t>();
                });
                if (!ok) return s.fail("usage", "members must be unsigned integers");
                v.usage = u;
            }
            const json* argv = s.find("argv", true);
            if (!argv || !argv->is_array()) return s.fail("argv", "must be an array of strings");
            for (const json& a : *argv) {
                if (!a.is_string()) return s.fail("argv", "must be an array of strings");
                v.argv.push_back(a.get<std::string>());
            }
            out.push_back(std::move(v));
        }
        return true;
    });
}

Decoded<ReadRequest> decode_read(std::string_view text) {
    return decode_with<ReadRequest>(text, 0, [](Reader& r, ReadRequest& v) {
        return r.id(v.id) && r.position("from", v.from) && r.u64("max_bytes", v.max_bytes, kMaxReadBytes, false);
    });
}

Decoded<LogReply> decode_log(std::string_view text) {
    return decode_with<LogReply>(text, 1, [](Reader& r, LogReply& v) {
        return r.id(v.id) && r.u64("start", v.start, UINT64_MAX) && r.u64("offset", v.offset, UINT64_MAX) &&
               r.u64("length", v.length, kMaxReadBytes) && r.u64("end", v.end, UINT64_MAX) && r.state(v.state) &&
               r.exit(v.exit);
    });
}

Decoded<WaitRequest> decode_wait(std::string_view text) {
    return decode_with<WaitRequest>(text, 0, [](Reader& r, WaitRequest& v) {
        std::string what = "exit";
        if (!r.id(v.id) || !r.str("for", what, 16, false) || !r.u64("timeout_ms", v.timeout_ms, kMaxWaitMs, false))
            return false;
        if (what == "exit") {
            v.what = WaitRequest::For::Exit;
        } else if (what == "quiet") {
            v.what = WaitRequest::For::Quiet;
            if (!r.u64("quiet_ms", v.quiet_ms, kMaxWaitMs)) return false;
            if (v.quiet_ms == 0) return r.fail("quiet_ms", "must be at least 1");
        } else if (what == "text") {
            v.what = WaitRequest::For::Text;
            if (!r.str("pattern", v.pattern, kMaxPatternLength) || !r.position("from", v.from)) return false;
            if (v.pattern.empty()) return r.fail("pattern", "must not be empty");
        } else if (what == "command") {
            v.what = WaitRequest::For::Command;
            std::uint64_t after = 0;
            if (r.find("after", false)) {
                if (!r.u64("after", after, UINT64_MAX)) return false;
                v.after = after;
            }
        } else if (what == "prompt") {
            v.what = WaitRequest::For::Prompt;
        } else if (what == "input") {
            v.what = WaitRequest::For::Input;
        } else {
            return r.fail("for", "must be \"exit\", \"quiet\", \"text\", \"command\", \"prompt\" or \"input\"");
        }
        return true;
    });
}

Decoded<WaitReply> decode_waited(std::string_view text) {
    return decode_with<WaitReply>(text, 1, [](Reader& r, WaitReply& v) {
        if (!r.boolean("matched", v.matched) || !r.str("reason", v.reason, 16) || !r.state(v.state) ||
            !r.exit(v.exit) || !r.u64("offset", v.offset, UINT64_MAX))
            return false;
        if (const json* c = r.find("command", false); c && !c->is_null()) {
            auto decoded = decode_command_record(dump(*c));
            if (!decoded) return r.fail("command", "is not a command record");
            v.command = std::move(*decoded.value);
        }
        // Where the text matched, for a text match only.
        return v.reason != "text" ||
               (r.u64("match_start", v.match_start, UINT64_MAX) && r.u64("match_end", v.match_end, UINT64_MAX));
    });
}

Decoded<KillRequest> decode_kill(std::string_view text) {
    return decode_with<KillRequest>(text, 0, [](Reader& r, KillRequest& v) {
        std::uint64_t sig = 0;
        if (!r.id(v.id) || !r.u64("signal", sig, 64, false)) return false;
        v.signal = static_cast<int>(sig);
        return true;
    });
}

Decoded<KillReply> decode_killed(std::string_view text) {
    return decode_with<KillReply>(text, 1,
                                  [](Reader& r, KillReply& v) { return r.id(v.id) && r.state(v.state) && r.exit(v.exit); });
}

Decoded<SentReply> decode_sent(std::string_view text) {
    return decode_with<SentReply>(text, 0, [](Reader& r, SentReply& v) { return r.u64("bytes", v.bytes, UINT64_MAX); });
}

Decoded<DroppedNotice> decode_dropped(std::string_view text) {
    return decode_with<DroppedNotice>(text, 0, [](Reader& r, DroppedNotice& v) {
        return r.u64("offset", v.offset, UINT64_MAX) && r.u64("lost", v.lost, UINT64_MAX);
    });
}

Decoded<SendRequest> decode_send(std::span<const std::uint8_t> payload) {
    if (payload.size() <= kSessionIdLength) return Decoded<SendRequest>::fail("SEND carries an id and at least one byte");
    const std::string id(payload.begin(), payload.begin() + kSessionIdLength);
    if (!is_session_id(id)) return Decoded<SendRequest>::fail("SEND must begin with 32 lowercase hex digits");
    return {SendRequest{id, payload.subspan(kSessionIdLength)}, {}};
}

}  // namespace ptyvisor::protocol
