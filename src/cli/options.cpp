#include "cli/options.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "client/default_socket.h"
#include "protocol/command_payloads.h"

extern char** environ;

namespace ptyvisor::cli {
namespace {

bool parse_dimension(std::string_view digits, std::string_view whole, std::uint16_t& out, std::string& why) {
    unsigned value = 0;
    const auto* end = digits.data() + digits.size();
    const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
    if (digits.empty() || ec != std::errc() || ptr != end || value < 1 || value > 65535) {
        why = "--size expects COLSxROWS with each between 1 and 65535, got '" + std::string(whole) + "'";
        return false;
    }
    out = static_cast<std::uint16_t>(value);
    return true;
}

std::string_view name_of(std::string_view entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

bool parse_size(std::string_view text, protocol::WindowSize& out, std::string& why) {
    const auto x = text.find_first_of("xX");
    if (x == std::string_view::npos) {
        why = "--size expects COLSxROWS, e.g. 80x24, got '" + std::string(text) + "'";
        return false;
    }
    protocol::WindowSize size;
    if (!parse_dimension(text.substr(0, x), text, size.cols, why) ||
        !parse_dimension(text.substr(x + 1), text, size.rows, why))
        return false;
    out = size;
    return true;
}

std::vector<std::string> current_environment() {
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
    return env;
}

std::optional<std::string> find_variable(const std::vector<std::string>& env, std::string_view name) {
    for (const auto& e : env)
        if (e.size() > name.size() && e[name.size()] == '=' && e.compare(0, name.size(), name) == 0)
            return e.substr(name.size() + 1);
    return std::nullopt;
}

void set_variable(std::vector<std::string>& env, std::string_view name, std::string_view value) {
    std::erase_if(env, [name](const std::string& e) { return name_of(e) == name; });
    env.push_back(std::string(name) + "=" + std::string(value));
}

bool build_environment(const std::vector<std::string>& inherited, bool clean, const std::vector<std::string>& settings,
                       std::vector<std::string>& out, std::string& why) {
    std::vector<std::string> env;
    if (!clean) {
        // Entries without '=' cannot be passed on (the protocol wants NAME=VALUE).
        for (const auto& e : inherited)
            if (const auto eq = e.find('='); eq != std::string::npos && eq > 0) env.push_back(e);
    }
    for (const auto& s : settings) {
        const auto eq = s.find('=');
        if (eq == std::string::npos || eq == 0) {
            why = "-e expects NAME=VALUE, got '" + s + "'";
            return false;
        }
        set_variable(env, std::string_view(s).substr(0, eq), std::string_view(s).substr(eq + 1));
    }
    out = std::move(env);
    return true;
}

std::string resolve_term(const std::optional<std::string>& flag,
                         const std::vector<std::string>& settings_env, const char* client_term) {
    if (flag && !flag->empty()) return *flag;
    if (auto set = find_variable(settings_env, "TERM"); set && !set->empty()) return *set;
    if (client_term != nullptr && *client_term != '\0') return client_term;
    return "dumb";
}

std::string resolve_socket_path(const std::optional<std::string>& flag, const char* env_value) {
    if (flag) return *flag;
    if (env_value != nullptr && *env_value != '\0') return env_value;
    return client::kDefaultSocketPath;
}

bool check_session_id(std::string_view text, std::string& why) {
    if (protocol::is_session_id(text)) return true;
    why = "'" + std::string(text) + "' is not a session id (32 lowercase hex digits, as `ptyvisor ls` shows them)";
    return false;
}

namespace {

bool parse_u64(std::string_view digits, std::uint64_t& out) {
    const auto* end = digits.data() + digits.size();
    const auto [ptr, ec] = std::from_chars(digits.data(), end, out);
    return !digits.empty() && ec == std::errc() && ptr == end;
}

}  // namespace

bool parse_log_position(std::string_view text, protocol::LogPosition& out, std::string& why) {
    if (text == "start") {
        out = {protocol::LogPosition::Kind::Start, 0};
        return true;
    }
    if (text == "tail") {
        out = {protocol::LogPosition::Kind::Tail, 0};
        return true;
    }
    std::uint64_t offset = 0;
    if (!parse_u64(text, offset)) {
        why = "--from expects start, tail or a byte offset, got '" + std::string(text) + "'";
        return false;
    }
    out = {protocol::LogPosition::Kind::Offset, offset};
    return true;
}

bool parse_wait_condition(std::string_view text, protocol::WaitRequest& out, std::string& why) {
    using For = protocol::WaitRequest::For;
    if (text == "exit") {
        out.what = For::Exit;
        return true;
    }
    if (text.starts_with("quiet:")) {
        std::uint64_t ms = 0;
        if (!parse_u64(text.substr(6), ms) || ms < 1 || ms > protocol::kMaxWaitMs) {
            why = "--for quiet:MS expects milliseconds between 1 and " + std::to_string(protocol::kMaxWaitMs) +
                  ", got '" + std::string(text) + "'";
            return false;
        }
        out.what = For::Quiet;
        out.quiet_ms = ms;
        return true;
    }
    if (text.starts_with("text:")) {
        const auto pattern = text.substr(5);
        if (pattern.empty() || pattern.size() > protocol::kMaxPatternLength) {
            why = "--for text:REGEX expects a pattern of 1 to " + std::to_string(protocol::kMaxPatternLength) +
                  " bytes, got " + std::to_string(pattern.size());
            return false;
        }
        out.what = For::Text;
        out.pattern = std::string(pattern);
        return true;
    }
    if (text == "command" || text == "prompt" || text == "input") {
        out.what = text == "command" ? For::Command : text == "prompt" ? For::Prompt : For::Input;
        return true;
    }
    why = "--for expects exit, quiet:MS, text:REGEX, command, prompt or input, got '" + std::string(text) + "'";
    return false;
}

bool parse_command_seq(std::string_view text, std::uint64_t& out, std::string& why) {
    if (parse_u64(text, out)) return true;
    why = "--after expects a command's seq (a number, as `ptyvisor commands` shows it), got '" + std::string(text) +
          "'";
    return false;
}

bool exec_line(const std::vector<std::string>& words, std::string& out, std::string& why) {
    std::string line;
    for (const auto& word : words) {
        if (!line.empty()) line += ' ';
        line += word;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) return why = "no command given", false;
    if (!protocol::is_exec_command(line, why)) return why = "cannot run this command line: " + why, false;
    out = std::move(line);
    return true;
}

bool parse_timeout_seconds(std::string_view text, std::uint64_t& milliseconds, std::string& why) {
    const auto fail = [&] {
        why = "--timeout expects seconds between 0 and 86400 (e.g. 30 or 0.5), got '" + std::string(text) + "'";
        return false;
    };
    // Digits, optionally a point and more digits: no sign, exponent, inf or nan.
    const auto point = text.find('.');
    const auto whole = text.substr(0, point);
    const auto fraction = point == std::string_view::npos ? std::string_view() : text.substr(point + 1);
    const auto digits = [](std::string_view s) {
        return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (text.empty() || !digits(whole) || !digits(fraction) || (whole.empty() && fraction.empty())) return fail();
    double seconds = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (ec != std::errc() || ptr != text.data() + text.size() || seconds > 86400) return fail();
    milliseconds = static_cast<std::uint64_t>(std::ceil(seconds * 1000));
    return true;
}

bool parse_signal(std::string_view text, int& out, std::string& why) {
    std::uint64_t number = 0;
    if (parse_u64(text, number)) {
        if (number < 1 || number > 64) {
            why = "-s expects a signal between 1 and 64, got '" + std::string(text) + "'";
            return false;
        }
        out = static_cast<int>(number);
        return true;
    }
    std::string name;
    for (const char c : text) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name.starts_with("SIG")) name.erase(0, 3);
    for (int sig = 1; sig < NSIG && sig <= 64; ++sig) {
        const char* abbrev = ::sigabbrev_np(sig);
        if (abbrev != nullptr && name == abbrev) {
            out = sig;
            return true;
        }
    }
    // The real-time signals have no abbreviation of their own.
    const auto rt = [&](std::string_view base, int zero, int sign) {
        if (!name.starts_with(base)) return false;
        const std::string_view rest = std::string_view(name).substr(base.size());
        std::uint64_t n = 0;
        if (!rest.empty() && !parse_u64(rest.substr(1), n)) return false;
        if (!rest.empty() && rest[0] != (sign > 0 ? '+' : '-')) return false;
        const long sig = zero + sign * static_cast<long>(n);
        if (sig < SIGRTMIN || sig > SIGRTMAX || sig > 64) return false;
        out = static_cast<int>(sig);
        return true;
    };
    if (rt("RTMIN", SIGRTMIN, 1) || rt("RTMAX", SIGRTMAX, -1)) return true;
    why = "-s expects a signal name (TERM, SIGINT, KILL, HUP, ...) or a number, got '" + std::string(text) + "'";
    return false;
}

}  // namespace ptyvisor::cli
