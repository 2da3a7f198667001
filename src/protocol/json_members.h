// Reading the JSON payloads of protocol version 2 and of the screen worker: one parser with a
// depth limit, and one reader of members. Internal to src/protocol (nlohmann/json is a
// private dependency of the library).
//
// Invariants: every reader returns false with `why` set to "'<key>' <what is wrong>" when the
// member is missing (and required) or not what it must be, and leaves `out` alone then; a
// string never holds a NUL byte or more than its bound.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ptyvisor::protocol::json_members {

using nlohmann::json;

// Compact, and never throws on invalid UTF-8 (replaced).
inline std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A JSON object whose containers nest at most `max_depth` below it; nullopt with `why`.
inline std::optional<json> parse_object(std::string_view text, int max_depth, std::string& why) {
    bool too_deep = false;
    json::parser_callback_t limit = [&](int depth, json::parse_event_t event, json&) {
        const bool opens = event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
        if (opens && depth > max_depth) too_deep = true;
        return !too_deep;
    };
    json value = json::parse(text.begin(), text.end(), limit, /*allow_exceptions=*/false);
    if (too_deep) why = "payload nests too deeply";
    else if (value.is_discarded()) why = "payload is not valid JSON";
    else if (!value.is_object()) why = "payload is not a JSON object";
    else return value;
    return std::nullopt;
}

inline bool fail(std::string& why, std::string_view key, const char* what) {
    why = "'" + std::string(key) + "' " + what;
    return false;
}

struct MemberReader {
    const json& o;
    std::string& why;

    const json* find(const char* key, bool required) {
        const auto it = o.find(key);
        if (it != o.end()) return &*it;
        if (required) json_members::fail(why, key, "is missing");
        return nullptr;
    }
    bool fail(const char* key, const char* what) { return json_members::fail(why, key, what); }
    bool u64(const char* key, std::uint64_t& out, std::uint64_t hi, bool required = true) {
        const json* v = find(key, required);
        if (!v) return !required;
        if (!v->is_number_unsigned()) return fail(key, "must be an unsigned integer");
        if (v->get<std::uint64_t>() > hi) return fail(key, "is out of range");
        out = v->get<std::uint64_t>();
        return true;
    }
    bool i64(const char* key, std::int64_t& out, bool required = true) {
        const json* v = find(key, required);
        if (!v) return !required;
        if (!v->is_number_integer()) return fail(key, "must be an integer");
        out = v->get<std::int64_t>();
        return true;
    }
    bool str(const char* key, std::string& out, std::size_t max_len, bool required = true) {
        const json* v = find(key, required);
        if (!v) return !required;
        if (!v->is_string()) return fail(key, "must be a string");
        const auto& s = v->get_ref<const std::string&>();
        if (s.size() > max_len) return fail(key, "is too long");
        if (s.find('\0') != std::string::npos) return fail(key, "contains a NUL byte");
        out = s;
        return true;
    }
    bool boolean(const char* key, bool& out, bool required = true) {
        const json* v = find(key, required);
        if (!v) return !required;
        if (!v->is_boolean()) return fail(key, "must be a boolean");
        out = v->get<bool>();
        return true;
    }
};

}  // namespace ptyvisor::protocol::json_members
