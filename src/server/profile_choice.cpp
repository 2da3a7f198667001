#include "server/profile_choice.h"

#include <algorithm>

namespace ptyvisor::server {

ProfileChoice choose_profile(const Config& config, const backends::Backend& backend, const std::string& requested) {
    ProfileChoice choice;
    const std::string& name = requested.empty() ? config.default_profile : requested;
    if (name.empty()) return choice;
    const bool allowed = name == config.default_profile ||
                         std::find(config.allowed_profiles.begin(), config.allowed_profiles.end(), name) !=
                             config.allowed_profiles.end();
    const auto it = config.profiles.find(name);
    if (!allowed || it == config.profiles.end()) {
        // The same answer whether the profile exists or not: the agent learns only what it may use.
        choice.error = protocol::ErrorCode::ProfileNotAllowed;
        choice.why = "profile \"" + name + "\" is not one the agent may choose";
        if (!config.allowed_profiles.empty()) {
            choice.why += " (allowed:";
            for (const auto& a : config.allowed_profiles) choice.why += " " + a;
            choice.why += ")";
        }
        return choice;
    }
    if (std::string why; !backend.check_profile(it->second, why)) {
        choice.error = protocol::ErrorCode::ProfileUnavailable;
        choice.why = "profile \"" + name + "\" cannot be enforced here: " + why;
        return choice;
    }
    choice.profile = it->second;
    return choice;
}

}  // namespace ptyvisor::server
