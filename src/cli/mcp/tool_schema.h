// The JSON-schema pieces that the MCP tools' definitions share (tools/list): the session id,
// the exit status, the state, and the object schemas of arguments and results.
#pragma once

#include <nlohmann/json.hpp>

namespace ptyvisor::cli::mcp::schema {

// A session id: 32 lowercase hex digits.
nlohmann::json id_property();
// A session's exit status: null while it runs.
nlohmann::json exit_property();
// "starting", "running" or "exited".
nlohmann::json state_property();
// Arguments: these properties and no others (a misspelt option should not pass silently).
nlohmann::json object_schema(nlohmann::json properties, nlohmann::json required);
// Results: these properties at least. More are allowed, so that a newer server's extra
// members do not break a client that validates.
nlohmann::json output_schema(nlohmann::json properties, nlohmann::json required);
// `properties` with the terminal size's cols and rows added.
nlohmann::json size_properties(nlohmann::json properties);

}  // namespace ptyvisor::cli::mcp::schema
