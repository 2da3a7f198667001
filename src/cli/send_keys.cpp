#include "cli/send_keys.h"

#include <cctype>
#include <utility>

namespace ptyvisor::cli {
namespace {

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

// Keys by name, with what xterm sends for them (normal cursor mode).
constexpr std::pair<std::string_view, std::string_view> kNamedKeys[] = {
    {"Enter", "\r"},
    {"Tab", "\t"},
    {"BTab", "\x1b[Z"},
    {"Escape", "\x1b"},
    {"Esc", "\x1b"},
    {"Space", " "},
    {"BSpace", "\x7f"},
    {"Backspace", "\x7f"},
    {"Up", "\x1b[A"},
    {"Down", "\x1b[B"},
    {"Right", "\x1b[C"},
    {"Left", "\x1b[D"},
    {"Home", "\x1b[H"},
    {"End", "\x1b[F"},
    {"PageUp", "\x1b[5~"},
    {"PgUp", "\x1b[5~"},
    {"PPage", "\x1b[5~"},
    {"PageDown", "\x1b[6~"},
    {"PgDn", "\x1b[6~"},
    {"NPage", "\x1b[6~"},
    {"Delete", "\x1b[3~"},
    {"DC", "\x1b[3~"},
    {"Insert", "\x1b[2~"},
    {"IC", "\x1b[2~"},
    {"F1", "\x1bOP"},
    {"F2", "\x1bOQ"},
    {"F3", "\x1bOR"},
    {"F4", "\x1bOS"},
    {"F5", "\x1b[15~"},
    {"F6", "\x1b[17~"},
    {"F7", "\x1b[18~"},
    {"F8", "\x1b[19~"},
    {"F9", "\x1b[20~"},
    {"F10", "\x1b[21~"},
    {"F11", "\x1b[23~"},
    {"F12", "\x1b[24~"},
};

std::optional<std::string> named_key(std::string_view name) {
    for (const auto& [key, bytes] : kNamedKeys)
        if (iequals(name, key)) return std::string(bytes);
    return std::nullopt;
}

// Control with `base`: a single character, or Space.
std::optional<std::string> control_key(std::string_view base) {
    if (iequals(base, "Space")) return std::string(1, '\0');
    if (base.size() != 1) return std::nullopt;
    const char c = base[0];
    if (c == '?') return std::string(1, '\x7f');
    if (c == ' ') return std::string(1, '\0');
    if ((c >= '@' && c <= '_') || (c >= 'a' && c <= 'z')) return std::string(1, static_cast<char>(c & 0x1f));
    return std::nullopt;
}

bool has_prefix(std::string_view name, char letter) {
    return name.size() > 2 && name[1] == '-' && std::tolower(static_cast<unsigned char>(name[0])) == letter;
}

}  // namespace

std::optional<std::string> key_bytes(std::string_view name) {
    if (name.empty()) return std::nullopt;
    if (has_prefix(name, 'm')) {
        auto rest = key_bytes(name.substr(2));
        if (!rest) return std::nullopt;
        return "\x1b" + *rest;
    }
    if (has_prefix(name, 'c')) {
        const auto rest = name.substr(2);
        // C-M-x: the meta prefix inside.
        if (has_prefix(rest, 'm')) {
            auto inner = control_key(rest.substr(2));
            if (!inner) return std::nullopt;
            return "\x1b" + *inner;
        }
        return control_key(rest);
    }
    if (name.size() == 2 && name[0] == '^') return control_key(name.substr(1));
    if (name.size() == 1) return std::string(name);
    return named_key(name);
}

std::string keys_to_bytes(const std::vector<std::string>& args) {
    std::string out;
    for (const auto& a : args) {
        if (auto bytes = key_bytes(a))
            out += *bytes;
        else
            out += a;
    }
    return out;
}

}  // namespace ptyvisor::cli
