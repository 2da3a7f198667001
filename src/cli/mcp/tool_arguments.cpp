#include "cli/mcp/tool_arguments.h"

#include "cli/options.h"

namespace ptyvisor::cli::mcp::arguments {

using nlohmann::json;

bool only_members(const json& args, std::initializer_list<std::string_view> allowed, std::string& why) {
    for (const auto& [key, value] : args.items()) {
        bool known = false;
        for (const auto a : allowed) known = known || key == a;
        if (!known) {
            why = "unknown argument '" + key + "'";
            return false;
        }
    }
    return true;
}

const json* member(const json& args, const char* name) {
    const auto it = args.find(name);
    return it == args.end() || it->is_null() ? nullptr : &*it;
}

bool get_string(const json& args, const char* name, std::optional<std::string>& out, std::string& why) {
    const json* v = member(args, name);
    if (v == nullptr) return true;
    if (!v->is_string()) return why = std::string("'") + name + "' must be a string", false;
    out = v->get<std::string>();
    return true;
}

bool get_uint(const json& args, const char* name, std::uint64_t low, std::uint64_t high,
              std::optional<std::uint64_t>& out, std::string& why) {
    const json* v = member(args, name);
    if (v == nullptr) return true;
    const bool negative = v->is_number_integer() && !v->is_number_unsigned() && v->get<std::int64_t>() < 0;
    if (!v->is_number_integer() || negative || v->get<std::uint64_t>() < low || v->get<std::uint64_t>() > high)
        return why = std::string("'") + name + "' must be an integer from " + std::to_string(low) + " to " +
                     std::to_string(high),
               false;
    out = v->get<std::uint64_t>();
    return true;
}

bool get_bool(const json& args, const char* name, bool& out, std::string& why) {
    const json* v = member(args, name);
    if (v == nullptr) return true;
    if (!v->is_boolean()) return why = std::string("'") + name + "' must be true or false", false;
    out = v->get<bool>();
    return true;
}

bool get_string_array(const json& args, const char* name, std::optional<std::vector<std::string>>& out,
                      std::string& why) {
    const json* v = member(args, name);
    if (v == nullptr) return true;
    if (!v->is_array()) return why = std::string("'") + name + "' must be an array of strings", false;
    std::vector<std::string> items;
    for (const auto& item : *v) {
        if (!item.is_string()) return why = std::string("'") + name + "' must be an array of strings", false;
        items.push_back(item.get<std::string>());
    }
    out = std::move(items);
    return true;
}

bool get_id(const json& args, std::string& id, std::string& why) {
    std::optional<std::string> text;
    if (!get_string(args, "id", text, why)) return false;
    if (!text) return why = "'id' is required", false;
    if (!check_session_id(*text, why)) return why = "'id': " + why, false;
    id = *text;
    return true;
}

bool get_size(const json& args, bool required, protocol::WindowSize& size, std::string& why) {
    std::optional<std::uint64_t> cols, rows;
    if (!get_uint(args, "cols", 1, 65535, cols, why) || !get_uint(args, "rows", 1, 65535, rows, why)) return false;
    if (required && (!cols || !rows)) return why = "'cols' and 'rows' are required", false;
    if (cols) size.cols = static_cast<std::uint16_t>(*cols);
    if (rows) size.rows = static_cast<std::uint16_t>(*rows);
    return true;
}

}  // namespace ptyvisor::cli::mcp::arguments
