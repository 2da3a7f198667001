#include "protocol/command_payloads.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "common/utf8.h"
#include "protocol/json_members.h"

namespace ptyvisor::protocol {
namespace {

using nlohmann::json;
using json_members::dump;

template <class T>
json or_null(const std::optional<T>& v) {
    return v ? json(*v) : json(nullptr);
}

json record_json(const CommandRecord& v) {
    return {{"seq", v.seq},
            {"command", v.command},
            {"cwd", v.cwd},
            {"output_start", v.output_start},
            {"output_end", or_null(v.output_end)},
            {"exit_code", or_null(v.exit_code)},
            {"started_ms", v.started_ms},
            {"ended_ms", or_null(v.ended_ms)}};
}

json record_or_null(const std::optional<CommandRecord>& v) { return v ? record_json(*v) : json(nullptr); }

struct Reader : json_members::MemberReader {
    bool id(std::string& out) {
        if (!str("id", out, kSessionIdLength)) return false;
        if (!is_session_id(out)) return fail("id", "must be 32 lowercase hex digits");
        return true;
    }
    // An unsigned member that may be null (or, when not required, missing).
    bool optional_u64(const char* key, std::optional<std::uint64_t>& out, std::uint64_t hi, bool required = true) {
        const json* v = find(key, required);
        if (!v || v->is_null()) return v || !required;
        std::uint64_t n = 0;
        if (!u64(key, n, hi)) return false;
        out = n;
        return true;
    }
    bool optional_i64(const char* key, std::optional<std::int64_t>& out) {
        const json* v = find(key, true);
        if (!v || v->is_null()) return v != nullptr;
        std::int64_t n = 0;
        if (!i64(key, n)) return false;
        out = n;
        return true;
    }
    bool text(const char* key, std::string& out) {
        if (!str(key, out, CommandRecord::kMaxText)) return false;
        if (!utf8::is_valid(out)) return fail(key, "is not valid UTF-8");
        return true;
    }
    bool record(const char* key, std::optional<CommandRecord>& out, bool required) {
        const json* v = find(key, required);
        if (!v || v->is_null()) return v || !required;
        if (!v->is_object()) return fail(key, "must be an object or null");
        auto decoded = decode_command_record(dump(*v));
        if (!decoded) return fail(key, "is not a command record");
        out = std::move(*decoded.value);
        return true;
    }
    bool session_state(const char* key, State& out) {
        std::string s;
        if (!str(key, s, 16)) return false;
        if (s == "starting") out = State::Starting;
        else if (s == "running") out = State::Running;
        else if (s == "exited") out = State::Exited;
        else return fail(key, "is unknown");
        return true;
    }
};

template <class T, class F>
Decoded<T> decode_with(std::string_view text, int depth, F read) {
    std::string why;
    const auto o = json_members::parse_object(text, depth, why);
    if (!o) return Decoded<T>::fail(why);
    T v{};
    Reader r{{*o, why}};
    if (!read(r, v)) return Decoded<T>::fail(why);
    return {std::move(v), {}};
}

constexpr std::string_view kOutcomes[] = {"exited", "waiting_for_input", "timeout", "interrupted", "session_ended"};
constexpr std::string_view kEventKinds[] = {"command_start", "command_end", "prompt", "input", "exit"};

}  // namespace

bool is_exec_command(std::string_view line, std::string& why) {
    if (line.empty()) return why = "'command' must not be empty", false;
    if (line.size() > kMaxExecCommand) return why = "'command' is too long", false;
    if (!utf8::is_valid(line)) return why = "'command' is not valid UTF-8", false;
    const bool control = std::any_of(line.begin(), line.end(), [](char c) {
        const auto b = static_cast<unsigned char>(c);
        return (b < 0x20 && b != '\t') || b == 0x7f;
    });
    if (control) return why = "'command' must be one line, without control characters", false;
    if (line.find_first_not_of(" \t") == std::string_view::npos)
        return why = "'command' must not be blank: a shell runs nothing for it", false;
    return true;
}

std::string_view to_string(ExecReply::Outcome outcome) { return kOutcomes[static_cast<int>(outcome)]; }
std::string_view to_string(SessionEvent::Kind kind) { return kEventKinds[static_cast<int>(kind)]; }

// ---- Encoders --------------------------------------------------------------------------

std::string encode(const CommandRecord& v) { return dump(record_json(v)); }

std::string encode(const CommandsRequest& v) { return dump({{"id", v.id}, {"since", v.since}}); }

std::string encode(const CommandListReply& v) {
    json commands = json::array();
    for (const auto& c : v.commands) commands.push_back(record_json(c));
    return dump({{"id", v.id},
                 {"shell", or_null(v.shell)},
                 {"at_prompt", v.at_prompt},
                 {"waiting_for_input", v.waiting_for_input},
                 {"current", record_or_null(v.current)},
                 {"commands", std::move(commands)},
                 {"first_seq", v.first_seq}});
}

std::string encode(const ExecRequest& v) {
    return dump({{"id", v.id}, {"command", v.command}, {"timeout_ms", v.timeout_ms}, {"interrupt", v.interrupt}});
}

std::string encode(const ExecReply& v) {
    return dump({{"id", v.id},
                 {"state", to_string(v.state)},
                 {"exit_code", or_null(v.exit_code)},
                 {"command", record_or_null(v.command)},
                 {"offset", v.offset},
                 {"session_state", to_string(v.session_state)}});
}

std::string encode(const WatchRequest& v) { return dump({{"id", v.id}}); }

std::string encode(const SessionEvent& v) {
    json j{{"event", to_string(v.kind)}, {"offset", v.offset}};
    switch (v.kind) {
        case SessionEvent::Kind::CommandStart:
        case SessionEvent::Kind::CommandEnd: j["command"] = record_or_null(v.command); break;
        case SessionEvent::Kind::Input: j["since_ms"] = v.since_ms; break;
        case SessionEvent::Kind::Exit: j["exit"] = v.exit ? json::parse(encode(*v.exit)) : json(nullptr); break;
        case SessionEvent::Kind::Prompt: break;
    }
    return dump(j);
}

// ---- Decoders --------------------------------------------------------------------------

Decoded<CommandRecord> decode_command_record(std::string_view text) {
    return decode_with<CommandRecord>(text, 0, [](Reader& r, CommandRecord& v) {
        std::optional<std::uint64_t> exit_code;
        if (!r.u64("seq", v.seq, UINT64_MAX) || !r.text("command", v.command) || !r.text("cwd", v.cwd) ||
            !r.u64("output_start", v.output_start, UINT64_MAX) || !r.optional_u64("output_end", v.output_end, UINT64_MAX) ||
            !r.optional_u64("exit_code", exit_code, 255) || !r.i64("started_ms", v.started_ms) ||
            !r.optional_i64("ended_ms", v.ended_ms))
            return false;
        if (exit_code) v.exit_code = static_cast<int>(*exit_code);
        if (v.output_end && *v.output_end < v.output_start) return r.fail("output_end", "is before output_start");
        return true;
    });
}

Decoded<CommandsRequest> decode_commands(std::string_view text) {
    return decode_with<CommandsRequest>(text, 0, [](Reader& r, CommandsRequest& v) {
        return r.id(v.id) && r.u64("since", v.since, UINT64_MAX, false);
    });
}

Decoded<CommandListReply> decode_command_list(std::string_view text) {
    return decode_with<CommandListReply>(text, 2, [](Reader& r, CommandListReply& v) {
        if (!r.id(v.id) || !r.boolean("at_prompt", v.at_prompt) || !r.boolean("waiting_for_input", v.waiting_for_input) ||
            !r.record("current", v.current, true) || !r.u64("first_seq", v.first_seq, UINT64_MAX))
            return false;
        const json* shell = r.find("shell", true);
        if (!shell) return false;
        if (shell->is_string()) {
            v.shell = shell->get<std::string>();
            if (v.shell->size() > 16) return r.fail("shell", "is too long");
        } else if (!shell->is_null()) {
            return r.fail("shell", "must be a string or null");
        }
        const json* list = r.find("commands", true);
        if (!list) return false;
        if (!list->is_array()) return r.fail("commands", "must be an array");
        for (const json& item : *list) {
            if (!item.is_object()) return r.fail("commands", "must hold objects");
            auto decoded = decode_command_record(dump(item));
            if (!decoded) return r.fail("commands", "holds something that is not a command record");
            v.commands.push_back(std::move(*decoded.value));
        }
        return true;
    });
}

Decoded<ExecRequest> decode_exec(std::string_view text) {
    return decode_with<ExecRequest>(text, 0, [](Reader& r, ExecRequest& v) {
        if (!r.id(v.id) || !r.str("command", v.command, kMaxExecCommand) ||
            !r.u64("timeout_ms", v.timeout_ms, kMaxWaitMs, false) || !r.boolean("interrupt", v.interrupt, false))
            return false;
        if (v.timeout_ms == 0) return r.fail("timeout_ms", "must be at least 1");
        return is_exec_command(v.command, r.why);
    });
}

Decoded<ExecReply> decode_executed(std::string_view text) {
    return decode_with<ExecReply>(text, 1, [](Reader& r, ExecReply& v) {
        std::string state;
        std::optional<std::uint64_t> exit_code;
        if (!r.id(v.id) || !r.str("state", state, 32) || !r.optional_u64("exit_code", exit_code, 255) ||
            !r.record("command", v.command, true) || !r.u64("offset", v.offset, UINT64_MAX) ||
            !r.session_state("session_state", v.session_state))
            return false;
        const auto* it = std::find(std::begin(kOutcomes), std::end(kOutcomes), state);
        if (it == std::end(kOutcomes)) return r.fail("state", "is unknown");
        v.state = static_cast<ExecReply::Outcome>(it - std::begin(kOutcomes));
        if (exit_code) v.exit_code = static_cast<int>(*exit_code);
        return true;
    });
}

Decoded<WatchRequest> decode_watch(std::string_view text) {
    return decode_with<WatchRequest>(text, 0, [](Reader& r, WatchRequest& v) { return r.id(v.id); });
}

Decoded<SessionEvent> decode_event(std::string_view text) {
    return decode_with<SessionEvent>(text, 2, [](Reader& r, SessionEvent& v) {
        std::string kind;
        if (!r.str("event", kind, 32) || !r.u64("offset", v.offset, UINT64_MAX)) return false;
        const auto* it = std::find(std::begin(kEventKinds), std::end(kEventKinds), kind);
        if (it == std::end(kEventKinds)) return r.fail("event", "is unknown");
        v.kind = static_cast<SessionEvent::Kind>(it - std::begin(kEventKinds));
        switch (v.kind) {
            case SessionEvent::Kind::CommandStart:
            case SessionEvent::Kind::CommandEnd: return r.record("command", v.command, true);
            case SessionEvent::Kind::Input: return r.i64("since_ms", v.since_ms);
            case SessionEvent::Kind::Exit: {
                const json* e = r.find("exit", true);
                if (!e) return false;
                if (e->is_null()) return true;
                auto decoded = decode_exit(dump(*e));
                if (!decoded) return r.fail("exit", "is not an exit status");
                v.exit = std::move(*decoded.value);
                return true;
            }
            case SessionEvent::Kind::Prompt: return true;
        }
        return true;
    });
}

}  // namespace ptyvisor::protocol
