#include "protocol/payloads.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "common/utf8.h"
#include "protocol/json_members.h"

namespace ptyvisor::protocol {
namespace {

using nlohmann::json;

// Control payloads are flat: an object whose members are scalars or arrays of scalars. The
// parser reports a container's start at its own depth: the top object at 0, a member's
// array at 1, so a container that starts at depth 2 is one nested too deep ({"x":[[]]}).
constexpr int kMaxContainerDepth = 1;
// STATUS nests once more: the objects in "sessions", and "rejected" (and "starts", "ended")
// in "counters". Older clients refuse anything deeper, so it never will (protocol.md 5.7).
constexpr int kMaxStatusContainerDepth = 2;

// Parses `text` as a JSON object whose containers start no deeper than `max_depth` (see
// above). False with `why` otherwise; the depth is checked while parsing, so a deep input
// costs no stack.
bool parse_object(std::string_view text, int max_depth, json& out, std::string& why) {
    auto value = json_members::parse_object(text, max_depth, why);
    if (!value) return false;
    out = std::move(*value);
    return true;
}

// Reads member `key` as an unsigned integer in [lo, hi].
bool get_uint(const json& o, const char* key, std::uint64_t lo, std::uint64_t hi,
              std::uint64_t& out, std::string& why, bool required = true) {
    const auto it = o.find(key);
    if (it == o.end() && !required) return true;
    if (it == o.end() || !it->is_number_unsigned()) {
        why = std::string("'") + key + "' must be an unsigned integer";
        return false;
    }
    const auto v = it->get<std::uint64_t>();
    if (v < lo || v > hi) {
        why = std::string("'") + key + "' is out of range";
        return false;
    }
    out = v;
    return true;
}

bool get_int(const json& o, const char* key, std::int64_t lo, std::int64_t hi, std::int64_t& out,
             std::string& why) {
    const auto it = o.find(key);
    if (it == o.end() || !it->is_number_integer()) {
        why = std::string("'") + key + "' must be an integer";
        return false;
    }
    const auto v = it->get<std::int64_t>();
    if (v < lo || v > hi) {
        why = std::string("'") + key + "' is out of range";
        return false;
    }
    out = v;
    return true;
}

bool get_string(const json& o, const char* key, std::size_t max_len, std::string& out,
                std::string& why, bool required = true) {
    const auto it = o.find(key);
    if (it == o.end()) {
        if (required) why = std::string("'") + key + "' is missing";
        return !required;
    }
    if (!it->is_string()) {
        why = std::string("'") + key + "' must be a string";
        return false;
    }
    const auto& s = it->get_ref<const std::string&>();
    if (s.size() > max_len) {
        why = std::string("'") + key + "' is too long";
        return false;
    }
    if (s.find('\0') != std::string::npos) {
        why = std::string("'") + key + "' contains a NUL byte";
        return false;
    }
    out = s;
    return true;
}

bool get_bool(const json& o, const char* key, bool& out, std::string& why, bool required = true) {
    const auto it = o.find(key);
    if (it == o.end() && !required) return true;
    if (it == o.end() || !it->is_boolean()) {
        why = std::string("'") + key + "' must be a boolean";
        return false;
    }
    out = it->get<bool>();
    return true;
}

// Member `key` as a JSON object or array; nullptr with `why` when it is missing or not one.
const json* get_container(const json& o, const char* key, bool array, std::string& why) {
    const auto it = o.find(key);
    if (it == o.end() || (array ? !it->is_array() : !it->is_object())) {
        why = std::string("'") + key + (array ? "' must be an array" : "' must be an object");
        return nullptr;
    }
    return &*it;
}

bool get_string_array(const json& o, const char* key, std::size_t max_count,
                      std::vector<std::string>& out, std::string& why) {
    const auto it = o.find(key);
    if (it == o.end() || !it->is_array()) {
        why = std::string("'") + key + "' must be an array of strings";
        return false;
    }
    if (it->size() > max_count) {
        why = std::string("'") + key + "' has too many entries";
        return false;
    }
    out.clear();
    out.reserve(it->size());
    for (const auto& e : *it) {
        if (!e.is_string()) {
            why = std::string("'") + key + "' must be an array of strings";
            return false;
        }
        const auto& s = e.get_ref<const std::string&>();
        if (s.find('\0') != std::string::npos) {
            why = std::string("'") + key + "' contains a NUL byte";
            return false;
        }
        out.push_back(s);
    }
    return true;
}

bool get_window(const json& o, WindowSize& size, std::string& why) {
    std::uint64_t rows = 0, cols = 0;
    if (!get_uint(o, "rows", 1, 0xffff, rows, why) || !get_uint(o, "cols", 1, 0xffff, cols, why))
        return false;
    size.rows = static_cast<std::uint16_t>(rows);
    size.cols = static_cast<std::uint16_t>(cols);
    return true;
}

constexpr std::array<std::pair<ExitReason, std::string_view>, 13> kReasons{{
    {ExitReason::Exited, "exited"},
    {ExitReason::Stopped, "stopped"},
    {ExitReason::Disconnected, "disconnected"},
    {ExitReason::ClientStalled, "client_stalled"},
    {ExitReason::DrainTimeout, "drain_timeout"},
    {ExitReason::Shutdown, "shutdown"},
    {ExitReason::InputFailed, "input_failed"},
    {ExitReason::OutputFailed, "output_failed"},
    {ExitReason::Timeout, "timeout"},
    {ExitReason::BackendFailed, "backend_failed"},
    {ExitReason::OomKill, "oom-kill"},
    {ExitReason::RuntimeLimit, "runtime-limit"},
    {ExitReason::IdleTimeout, "idle-timeout"},
}};

// The members of a session's `usage` and the metrics counters, with their JSON names: the
// encoder and the decoder read the same table, so neither can miss one.
using UsageMember = std::optional<std::uint64_t> StatusReply::Session::Usage::*;
constexpr std::array<std::pair<const char*, UsageMember>, 9> kUsageMembers{{
    {"cpu_usec", &StatusReply::Session::Usage::cpu_usec},
    {"memory_current", &StatusReply::Session::Usage::memory_current},
    {"memory_peak", &StatusReply::Session::Usage::memory_peak},
    {"tasks_current", &StatusReply::Session::Usage::tasks_current},
    {"tasks_peak", &StatusReply::Session::Usage::tasks_peak},
    {"oom_kills", &StatusReply::Session::Usage::oom_kills},
    {"tasks_limit_hits", &StatusReply::Session::Usage::tasks_limit_hits},
    {"io_read_bytes", &StatusReply::Session::Usage::io_read_bytes},
    {"io_write_bytes", &StatusReply::Session::Usage::io_write_bytes},
}};
using CounterMember = std::optional<std::uint64_t> StatusReply::Counters::*;
constexpr std::array<std::pair<const char*, CounterMember>, 5> kCounterMembers{{
    {"relayed_in", &StatusReply::Counters::relayed_in},
    {"relayed_out", &StatusReply::Counters::relayed_out},
    {"screen_worker_restarts", &StatusReply::Counters::screen_worker_restarts},
    {"admission_waits", &StatusReply::Counters::admission_waits},
    {"admission_wait_usec", &StatusReply::Counters::admission_wait_usec},
}};

// Replaces invalid UTF-8 rather than throw: a message may quote hostile bytes.
using json_members::dump;

// `text` with NUL and each byte that starts no valid UTF-8 sequence replaced by U+FFFD: what
// the JSON encoder would otherwise do after the text had been measured against its bound,
// and what no decoder accepts.
std::string valid_text(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    while (!text.empty()) {
        const utf8::Sequence s = utf8::next(text);
        if (text.front() == '\0' || s.kind != utf8::Sequence::Kind::Character) {
            out += utf8::kReplacement;
            text.remove_prefix(1);
        } else {
            out.append(text.substr(0, s.length));
            text.remove_prefix(s.length);
        }
    }
    return out;
}

// A STATUS string: valid, then cut to `max_bytes` at a character boundary.
std::string status_text(std::string_view text, std::size_t max_bytes) {
    return bounded_text(valid_text(text), max_bytes);
}

json status_session(const StatusReply::Session& s) {
    // Clamped into the ranges decode_status() accepts; a daemon never needs the clamp.
    json j{{"unit", status_text(s.unit, kMaxStatusUnitBytes)},
                {"pid", std::clamp<std::int64_t>(s.pid, 0, INT32_MAX)},
                {"peer_pid", std::clamp<std::int64_t>(s.peer_pid, 0, INT32_MAX)},
                {"started_at", std::max<std::int64_t>(s.started_at, 0)},
                {"bytes_in", s.bytes_in},
                {"bytes_out", s.bytes_out},
                {"argv0", status_text(s.argv0, kMaxStatusArgv0Bytes)}};
    if (!s.id.empty()) {  // version 2's members, only where there is a session id to say them of
        j["id"] = status_text(s.id, 32);
        j["clients"] = s.clients;
        j["detached"] = s.detached;
    }
    if (s.state) j["state"] = status_text(*s.state, kMaxStatusNameBytes);
    if (s.profile) j["profile"] = status_text(*s.profile, kMaxStatusNameBytes);
    // The usage figures are members of the session itself, not an object of their own: one
    // level deeper than older clients accept.
    if (s.usage)
        for (const auto& [name, member] : kUsageMembers)
            if (const auto& v = (*s.usage).*member) j[name] = *v;
    return j;
}

// A map of counts by name, as `rejected`, `starts` and `ended` are sent: at most `max`
// names, each cut to kMaxStatusNameBytes.
json count_map(const std::map<std::string, std::uint64_t>& counts, std::size_t max) {
    json out = json::object();
    for (const auto& [name, count] : counts) {
        if (out.size() == max) break;
        out[status_text(name, kMaxStatusNameBytes)] = count;
    }
    return out;
}

json status_counters(const StatusReply::Counters& c) {
    json out{{"accepted", c.accepted},
             {"rejected", count_map(c.rejected, kMaxStatusRejectedCodes)},
             {"rate_limited", c.rate_limited},
             {"handshake_timeouts", c.handshake_timeouts},
             {"evicted", c.evicted}};
    if (c.hung_up) out["hung_up"] = *c.hung_up;
    if (c.quarantined) out["quarantined"] = *c.quarantined;
    if (c.starts) out["starts"] = count_map(*c.starts, kMaxStatusStartResults);
    if (c.ended) out["ended"] = count_map(*c.ended, kMaxStatusRejectedCodes);
    for (const auto& [name, member] : kCounterMembers)
        if (const auto& v = c.*member) out[name] = *v;
    return out;
}

// An unsigned 64-bit member that may be absent (nullopt).
bool get_optional_uint(const json& o, const char* key, std::optional<std::uint64_t>& out, std::string& why) {
    if (!o.contains(key)) return true;
    std::uint64_t v = 0;
    if (!get_uint(o, key, 0, UINT64_MAX, v, why)) return false;
    out = v;
    return true;
}

bool get_optional_string(const json& o, const char* key, std::size_t max_len, std::optional<std::string>& out,
                         std::string& why) {
    if (!o.contains(key)) return true;
    std::string v;
    if (!get_string(o, key, max_len, v, why)) return false;
    out = std::move(v);
    return true;
}

// The usage figures, members of the session object; nullopt when none is there.
bool get_usage(const json& o, std::optional<StatusReply::Session::Usage>& out, std::string& why) {
    StatusReply::Session::Usage u;
    for (const auto& [name, member] : kUsageMembers)
        if (!get_optional_uint(o, name, u.*member, why)) return false;
    if (u != StatusReply::Session::Usage{}) out = u;
    return true;
}

bool get_status_session(const json& o, StatusReply::Session& s, std::string& why) {
    return get_string(o, "unit", kMaxStatusUnitBytes, s.unit, why) &&
           get_int(o, "pid", 0, INT32_MAX, s.pid, why) &&
           get_int(o, "peer_pid", 0, INT32_MAX, s.peer_pid, why) &&
           get_int(o, "started_at", 0, INT64_MAX, s.started_at, why) &&
           get_uint(o, "bytes_in", 0, UINT64_MAX, s.bytes_in, why) &&
           get_uint(o, "bytes_out", 0, UINT64_MAX, s.bytes_out, why) &&
           get_string(o, "argv0", kMaxStatusArgv0Bytes, s.argv0, why) &&
           // Since protocol version 2; absent from older daemons.
           get_string(o, "id", 32, s.id, why, /*required=*/false) &&
           get_uint(o, "clients", 0, UINT32_MAX, s.clients, why, /*required=*/false) &&
           get_bool(o, "detached", s.detached, why, /*required=*/false) &&
           // Since metrics.
           get_optional_string(o, "state", kMaxStatusNameBytes, s.state, why) &&
           get_optional_string(o, "profile", kMaxStatusNameBytes, s.profile, why) && get_usage(o, s.usage, why);
}

bool get_status_sessions(const json& o, std::vector<StatusReply::Session>& out, std::string& why) {
    const json* sessions = get_container(o, "sessions", /*array=*/true, why);
    if (!sessions) return false;
    if (sessions->size() > kMaxStatusSessions) {
        why = "'sessions' has too many entries";
        return false;
    }
    out.reserve(sessions->size());
    for (const json& entry : *sessions) {
        StatusReply::Session s;
        if (!entry.is_object()) {
            why = "'sessions' entry " + std::to_string(out.size()) + " is not an object";
            return false;
        }
        if (!get_status_session(entry, s, why)) {
            why = "'sessions' entry " + std::to_string(out.size()) + ": " + why;
            return false;
        }
        out.push_back(std::move(s));
    }
    return true;
}

// Member `key` of `counters`, an object of counts by name (`rejected`, `starts`, `ended`):
// at most `max` names, each a non-empty name of at most kMaxStatusNameBytes.
bool get_count_map(const json& counters, const char* key, std::size_t max, std::map<std::string, std::uint64_t>& out,
                   std::string& why) {
    const json* counts = get_container(counters, key, /*array=*/false, why);
    if (!counts) return false;
    const std::string quoted = std::string("'") + key + "'";
    if (counts->size() > max) {
        why = quoted + " has too many entries";
        return false;
    }
    for (auto it = counts->begin(); it != counts->end(); ++it) {
        const std::string& name = it.key();
        if (name.empty() || name.size() > kMaxStatusNameBytes || name.find('\0') != std::string::npos) {
            why = quoted + (key == std::string_view("rejected") ? " has a member name that is not an error code"
                                                                : " has a member name that is not a name");
            return false;
        }
        if (!it->is_number_unsigned()) {
            why = quoted + " counts must be unsigned integers";
            return false;
        }
        out[name] = it->get<std::uint64_t>();
    }
    return true;
}

bool get_optional_count_map(const json& counters, const char* key, std::size_t max,
                            std::optional<std::map<std::string, std::uint64_t>>& out, std::string& why) {
    if (!counters.contains(key)) return true;
    std::map<std::string, std::uint64_t> counts;
    if (!get_count_map(counters, key, max, counts, why)) return false;
    out = std::move(counts);
    return true;
}

bool get_optional_counters(const json& counters, StatusReply::Counters& c, std::string& why) {
    for (const auto& [name, member] : kCounterMembers)
        if (!get_optional_uint(counters, name, c.*member, why)) return false;
    return true;
}

bool get_status_counters(const json& o, StatusReply::Counters& c, std::string& why) {
    const json* counters = get_container(o, "counters", /*array=*/false, why);
    if (!counters) return false;
    if (get_uint(*counters, "accepted", 0, UINT64_MAX, c.accepted, why) &&
        get_uint(*counters, "rate_limited", 0, UINT64_MAX, c.rate_limited, why) &&
        get_uint(*counters, "handshake_timeouts", 0, UINT64_MAX, c.handshake_timeouts, why) &&
        get_uint(*counters, "evicted", 0, UINT64_MAX, c.evicted, why) &&
        get_optional_uint(*counters, "hung_up", c.hung_up, why) &&
        get_optional_uint(*counters, "quarantined", c.quarantined, why) &&
        get_count_map(*counters, "rejected", kMaxStatusRejectedCodes, c.rejected, why) &&
        get_optional_count_map(*counters, "starts", kMaxStatusStartResults, c.starts, why) &&
        get_optional_count_map(*counters, "ended", kMaxStatusRejectedCodes, c.ended, why) &&
        get_optional_counters(*counters, c, why))
        return true;
    why = "'counters': " + why;
    return false;
}

}  // namespace

std::string_view to_string(ExitReason reason) {
    for (const auto& [r, name] : kReasons)
        if (r == reason) return name;
    return "exited";
}

std::optional<ExitReason> exit_reason_from_string(std::string_view name) {
    for (const auto& [r, n] : kReasons)
        if (n == name) return r;
    return std::nullopt;
}

std::vector<std::string_view> exit_reason_names() {
    std::vector<std::string_view> out;
    for (const auto& [r, n] : kReasons) out.push_back(n);
    return out;
}

int ExitStatus::shell_status() const {
    switch (kind) {
        case Kind::Exited: return code;
        case Kind::Signaled: return 128 + signal;
        case Kind::Unknown: return 255;
    }
    return 255;
}

ExitStatus exit_status_for_version(ExitStatus status, int version) {
    if (version >= 6) return status;
    switch (status.reason) {
        case ExitReason::OomKill:
            status.reason = ExitReason::Exited;
            if (status.unit_result.empty()) status.unit_result = "oom-kill";
            break;
        case ExitReason::RuntimeLimit:
        case ExitReason::IdleTimeout: status.reason = ExitReason::Timeout; break;
        default: break;
    }
    return status;
}

std::optional<ExitStatus> exit_status_for_version(const std::optional<ExitStatus>& status, int version) {
    if (!status) return std::nullopt;
    return exit_status_for_version(*status, version);
}

std::string encode(const StartRequest& v) {
    json j{{"argv", v.argv}, {"env", v.env},   {"cwd_dev", v.cwd_dev},   {"cwd_ino", v.cwd_ino},
           {"term", v.term}, {"rows", v.size.rows}, {"cols", v.size.cols}};
    if (v.detach) j["detach"] = true;  // only then: a version 1 server reads what it knows
    if (v.terminal) j["terminal"] = true;
    if (v.shell_integration) j["shell_integration"] = true;
    if (!v.profile.empty()) j["profile"] = v.profile;
    return dump(j);
}

std::string encode(const Started& v) {
    json j{{"unit", bounded_text(v.unit, 256)}, {"pid", v.pid}};
    if (!v.id.empty()) j["id"] = bounded_text(v.id, 32);
    return dump(j);
}

std::string encode(const WindowSize& v) { return dump(json{{"rows", v.rows}, {"cols", v.cols}}); }

std::string encode(const SignalRequest& v) {
    return dump(json{{"signal", v.signal},
                     {"target", v.target == SignalTarget::Session ? "session" : "foreground"}});
}

std::string encode(const ExitStatus& v) {
    json j{{"unit_result", bounded_text(v.unit_result, 64)}, {"reason", std::string(to_string(v.reason))}};
    switch (v.kind) {
        case ExitStatus::Kind::Exited:
            j["status"] = "exited";
            j["code"] = v.code;
            break;
        case ExitStatus::Kind::Signaled:
            j["status"] = "signaled";
            j["signal"] = v.signal;
            j["core_dumped"] = v.core_dumped;
            break;
        case ExitStatus::Kind::Unknown: j["status"] = "unknown"; break;
    }
    return dump(j);
}

std::string bounded_text(std::string_view text, std::size_t max_bytes) {
    if (text.size() <= max_bytes) return std::string(text);
    static constexpr std::string_view kEllipsis = "...";
    if (max_bytes < kEllipsis.size()) return std::string(kEllipsis.substr(0, max_bytes));
    std::size_t cut = max_bytes - kEllipsis.size();
    // Back up over continuation bytes (10xxxxxx) so that no character is split; at most 3.
    for (int i = 0; i < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80; ++i) --cut;
    std::string out(text.substr(0, cut));
    out += kEllipsis;
    return out;
}

std::string encode(const ErrorReply& v) {
    // JSON escaping can make a byte six ("\u0001"), and replacing bad UTF-8 makes one three:
    // cut until it fits, so that no message can exceed the frame's bound.
    std::size_t limit = kMaxErrorMessageBytes;
    for (;;) {
        auto text = dump(json{{"code", std::string(to_string(v.code))}, {"message", bounded_text(v.message, limit)}});
        if (text.size() <= kMaxControlPayloadSize || limit == 0) return text;
        limit /= 2;
    }
}

Decoded<StartRequest> decode_start(std::string_view text) {
    std::string why;
    json o;
    if (!parse_object(text, kMaxContainerDepth, o, why)) return Decoded<StartRequest>::fail(why);
    StartRequest v;
    std::uint64_t dev = 0, ino = 0;
    if (!get_string_array(o, "argv", kMaxArgc, v.argv, why) ||
        !get_string_array(o, "env", kMaxEnvc, v.env, why) ||
        !get_uint(o, "cwd_dev", 0, UINT64_MAX, dev, why) ||
        !get_uint(o, "cwd_ino", 0, UINT64_MAX, ino, why) ||
        !get_string(o, "term", kMaxTermLength, v.term, why, /*required=*/false) ||
        !get_window(o, v.size, why))
        return Decoded<StartRequest>::fail(why);
    if (!get_bool(o, "detach", v.detach, why, /*required=*/false)) return Decoded<StartRequest>::fail(why);
    if (!get_bool(o, "terminal", v.terminal, why, /*required=*/false)) return Decoded<StartRequest>::fail(why);
    if (!get_bool(o, "shell_integration", v.shell_integration, why, /*required=*/false))
        return Decoded<StartRequest>::fail(why);
    if (!get_string(o, "profile", kMaxProfileNameLength, v.profile, why, /*required=*/false))
        return Decoded<StartRequest>::fail(why);
    if (v.argv.empty() || v.argv[0].empty())
        return Decoded<StartRequest>::fail("'argv' must name a command");
    for (const auto& e : v.env)
        if (e.find('=') == std::string::npos || e.front() == '=')
            return Decoded<StartRequest>::fail("'env' entries must be NAME=VALUE");
    v.cwd_dev = dev;
    v.cwd_ino = ino;
    return {std::move(v), {}};
}

Decoded<Started> decode_started(std::string_view text) {
    std::string why;
    json o;
    if (!parse_object(text, kMaxContainerDepth, o, why)) return Decoded<Started>::fail(why);
    Started v;
    if (!get_string(o, "unit", 256, v.unit, why) ||
        !get_int(o, "pid", 0, INT32_MAX, v.pid, why) ||
        !get_string(o, "id", 32, v.id, why, /*required=*/false))
        return Decoded<Started>::fail(why);
    return {std::move(v), {}};
}

Decoded<WindowSize> decode_resize(std::string_view text) {
    std::string why;
    json o;
    if (!parse_object(text, kMaxContainerDepth, o, why)) return Decoded<WindowSize>::fail(why);
    WindowSize v;
    if (!get_window(o, v, why)) return Decoded<WindowSize>::fail(why);
    return {v, {}};
}

Decoded<SignalRequest> decode_signal(std::string_view text) {
    std::string why;
    json o;
    if (!parse_object(text, kMaxContainerDepth, o, why)) return Decoded<SignalRequest>::fail(why);
    SignalRequest v;
    std::int64_t sig = 0;
    std::string target = "foreground";
    if (!get_int(o, "signal", 1, 64, sig, why) ||
        !get_string(o, "target", 16, target, why, /*required=*/false))
        return Decoded<SignalRequest>::fail(why);
    if (target == "foreground") {
        v.target = SignalTarget::Foreground;
    } else if (target == "session") {
        v.target = SignalTarget::Session;
    } else {
        return Decoded<SignalRequest>::fail("'target' must be \"foreground\" or \"session\"");
    }
    v.signal = static_cast<int>(sig);
    return {v, {}};
}

Decoded<ExitStatus> decode_exit(std::string_view text) {
    std::string why;
    json o;
    if (!parse_object(text, kMaxContainerDepth, o, why)) return Decoded<ExitStatus>::fail(why);
    ExitStatus v;
    std::string status, reason;
    if (!get_string(o, "status", 16, status, why) || !get_string(o, "reason", 32, reason, why) ||
        !get_string(o, "unit_result", 64, v.unit_result, why, /*required=*/false))
        return Decoded<ExitStatus>::fail(why);
    const auto r = exit_reason_from_string(reason);
    if (!r) return Decoded<ExitStatus>::fail("unknown 'reason'");
    v.reason = *r;
    std::int64_t n = 0;
    if (status == "exited") {
        if (!get_int(o, "code", 0, 255, n, why)) return Decoded<ExitStatus>::fail(why);
        v.kind = ExitStatus::Kind::Exited;
        v.code = static_cast<int>(n);
    } else if (status == "signaled") {
        if (!get_int(o, "signal", 1, 64, n, why) || !get_bool(o, "core_dumped", v.core_dumped, why))
            return Decoded<ExitStatus>::fail(why);
        v.kind = ExitStatus::Kind::Signaled;
        v.signal = static_cast<int>(n);
    } else if (status == "unknown") {
        v.kind = ExitStatus::Kind::Unknown;
    } else {
        return Decoded<ExitStatus>::fail("unknown 'status'");
    }
    return {std::move(v), {}};
}

Decoded<ErrorReply> decode_error(std::string_view text) {
    std::string why;
    json o;
    if (!parse_object(text, kMaxContainerDepth, o, why)) return Decoded<ErrorReply>::fail(why);
    ErrorReply v;
    std::string code;
    if (!get_string(o, "code", 64, code, why) ||
        !get_string(o, "message", kMaxControlPayloadSize, v.message, why))
        return Decoded<ErrorReply>::fail(why);
    // An unknown code from a newer server still reads as an error.
    v.code = error_code_from_string(code).value_or(ErrorCode::Internal);
    return {std::move(v), {}};
}

std::string encode(const StatusReply& v) {
    json out{{"version", status_text(v.version, kMaxStatusNameBytes)},
             {"backend", status_text(v.backend, kMaxStatusNameBytes)},
             {"counters", status_counters(v.counters)}};
    if (v.truncated) out["truncated"] = true;
    if (v.sessions.size() <= kMaxStatusSessions) {
        json sessions = json::array();
        for (const auto& s : v.sessions) sessions.push_back(status_session(s));
        out["sessions"] = std::move(sessions);
        auto text = dump(out);
        if (text.size() <= kMaxStatusPayloadSize) return text;
    }
    // What is left is a few kilobytes at most: names and counts, each bounded.
    out["sessions"] = json::array();
    out["truncated"] = true;
    return dump(out);
}

Decoded<StatusReply> decode_status(std::string_view text) {
    std::string why;
    json o;
    if (!parse_object(text, kMaxStatusContainerDepth, o, why)) return Decoded<StatusReply>::fail(why);
    StatusReply v;
    if (!get_string(o, "version", kMaxStatusNameBytes, v.version, why) ||
        !get_string(o, "backend", kMaxStatusNameBytes, v.backend, why) ||
        !get_status_sessions(o, v.sessions, why) || !get_status_counters(o, v.counters, why) ||
        !get_bool(o, "truncated", v.truncated, why, /*required=*/false))
        return Decoded<StatusReply>::fail(why);
    return {std::move(v), {}};
}

}  // namespace ptyvisor::protocol
