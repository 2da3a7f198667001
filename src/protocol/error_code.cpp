#include "protocol/error_code.h"

#include <cstddef>

#include "protocol/wire_spec.h"

namespace ptyvisor::protocol {

// The names come from protocol/protocol.json, in the order of the enumerators (frame.cpp
// checks that order at compile time).

std::string_view to_string(ErrorCode code) {
    const auto index = static_cast<std::size_t>(code);
    return index < wire::kErrorCodeNames.size() ? wire::kErrorCodeNames[index] : "internal";
}

std::optional<ErrorCode> error_code_from_string(std::string_view name) {
    for (std::size_t i = 0; i < wire::kErrorCodeNames.size(); ++i)
        if (wire::kErrorCodeNames[i] == name) return static_cast<ErrorCode>(i);
    return std::nullopt;
}

}  // namespace ptyvisor::protocol
