// Which sandbox profile a START gets (docs/configuration.md, "Sandbox profiles").
//
// The agent may name one of allowed_profiles; without a name it gets default_profile, or no
// profile when none is configured. The backend must be able to enforce the profile on this
// host (Backend::check_profile): a START is refused rather than run with less confinement
// than its profile says.
#pragma once

#include <optional>
#include <string>

#include "backends/backend.h"
#include "protocol/error_code.h"
#include "server/config.h"

namespace ptyvisor::server {

struct ProfileChoice {
    std::optional<backends::SandboxProfile> profile;  // nullopt: the session runs without one
    std::optional<protocol::ErrorCode> error;         // set: the START is refused, with `why`
    std::string why;
};

ProfileChoice choose_profile(const Config& config, const backends::Backend& backend, const std::string& requested);

}  // namespace ptyvisor::server
