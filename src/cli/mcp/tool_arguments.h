// Checks of a tool call's arguments (a JSON object) that the tools share. Each is false with
// `why`, a sentence that names the argument, for the model to correct its call. A member
// that is absent or null is not given: the out parameter is left as it was.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/payloads.h"

namespace ptyvisor::cli::mcp::arguments {

// Whether `args` has no member but those `allowed`.
bool only_members(const nlohmann::json& args, std::initializer_list<std::string_view> allowed, std::string& why);
// The member `name`, or nullptr when it is absent or null.
const nlohmann::json* member(const nlohmann::json& args, const char* name);

bool get_string(const nlohmann::json& args, const char* name, std::optional<std::string>& out, std::string& why);
// An integer from `low` to `high`.
bool get_uint(const nlohmann::json& args, const char* name, std::uint64_t low, std::uint64_t high,
              std::optional<std::uint64_t>& out, std::string& why);
bool get_bool(const nlohmann::json& args, const char* name, bool& out, std::string& why);
bool get_string_array(const nlohmann::json& args, const char* name, std::optional<std::vector<std::string>>& out,
                      std::string& why);
// `id`, required: a session id.
bool get_id(const nlohmann::json& args, std::string& id, std::string& why);
// `cols` and `rows`, both required when `required`; each given one goes into `size`.
bool get_size(const nlohmann::json& args, bool required, protocol::WindowSize& size, std::string& why);

}  // namespace ptyvisor::cli::mcp::arguments
