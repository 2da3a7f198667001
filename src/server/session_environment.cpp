#include "server/session_environment.h"

#include <algorithm>

namespace ptyvisor::server {
namespace {

bool has(const std::vector<std::string>& env, const std::string& name) {
    return std::any_of(env.begin(), env.end(),
                       [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; });
}

}  // namespace

std::vector<std::string> session_environment(std::vector<std::string> env, const std::string& term,
                                             const backends::Account& account) {
    std::erase_if(env, [](const std::string& e) { return e.rfind("TERM=", 0) == 0; });
    env.push_back("TERM=" + (term.empty() ? std::string("dumb") : term));
    const std::pair<const char*, std::string> defaults[] = {
        {"USER", account.name}, {"LOGNAME", account.name}, {"HOME", account.home},
        {"SHELL", account.shell.empty() ? "/bin/sh" : account.shell},
        {"PATH", "/usr/local/bin:/usr/bin:/bin"}};
    for (const auto& [name, value] : defaults)
        if (!has(env, name)) env.push_back(std::string(name) + "=" + value);
    return env;
}

}  // namespace ptyvisor::server
