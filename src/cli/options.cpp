#include "cli/options.h"

#include <charconv>
#include <cstdint>

#include "client/default_socket.h"

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

}  // namespace ptyvisor::cli
