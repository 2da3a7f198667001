#include "cli/mcp/tool_schema.h"

namespace ptyvisor::cli::mcp::schema {

using nlohmann::json;

json id_property() {
    return {{"type", "string"},
            {"pattern", "^[0-9a-f]{32}$"},
            {"description", "The session's id, as terminal_start or terminal_list returned it."}};
}

json exit_property() {
    return {{"type", {"object", "null"}},
            {"description",
             "null while the session runs; once it has exited: {status: \"exited\", code} or "
             "{status: \"signaled\", signal}, and the reason it ended."}};
}

json state_property() { return {{"type", "string"}, {"enum", {"starting", "running", "exited"}}}; }

json object_schema(json properties, json required) {
    return {{"type", "object"},
            {"properties", std::move(properties)},
            {"required", std::move(required)},
            {"additionalProperties", false}};
}

json output_schema(json properties, json required) {
    return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}};
}

json size_properties(json properties) {
    properties["cols"] = {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}, {"description", "Columns."}};
    properties["rows"] = {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}, {"description", "Rows."}};
    return properties;
}

}  // namespace ptyvisor::cli::mcp::schema
