#include "server/shell_integration.h"

#include <algorithm>
#include <filesystem>
#include <string_view>

namespace ptyvisor::server {

namespace {

constexpr std::string_view kLoginVariable = "PTYVISOR_SHELL_LOGIN";
constexpr std::string_view kUserZdotdirVariable = "PTYVISOR_USER_ZDOTDIR";
constexpr std::string_view kZdotdirVariable = "ZDOTDIR";

bool has_key(const std::string& entry, std::string_view key) {
    return entry.size() > key.size() && entry.compare(0, key.size(), key) == 0 && entry[key.size()] == '=';
}

// The value getenv() would find in the program started with `env`: the first entry's.
std::optional<std::string> find_value(const std::vector<std::string>& env, std::string_view key) {
    for (const auto& entry : env)
        if (has_key(entry, key)) return entry.substr(key.size() + 1);
    return std::nullopt;
}

void erase_key(std::vector<std::string>& env, std::string_view key) {
    std::erase_if(env, [key](const std::string& entry) { return has_key(entry, key); });
}

}  // namespace

std::string shell_integration_dir() {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        // A daemon (or test) built and run in the build tree uses the scripts it was built
        // with; an installed one never looks at the source tree.
        const std::string self_path = self.string();
        const std::string build_dir = PTYVISOR_BUILD_DIR "/";
        if (self_path.compare(0, build_dir.size(), build_dir) == 0) return PTYVISOR_SOURCE_SHELL_INTEGRATION_DIR;
        const auto installed = self.parent_path().parent_path() / "share/ptyvisor/shell-integration";
        if (std::filesystem::is_directory(installed, ec)) return installed.string();
    }
    return PTYVISOR_DATADIR "/ptyvisor/shell-integration";
}

std::optional<IntegratedShell> integrate_shell(const std::vector<std::string>& argv, std::vector<std::string> env,
                                               const std::string& dir, std::string& why) {
    if (argv.empty() || argv[0].empty()) {
        why = "shell integration needs a shell to start: the command is empty";
        return std::nullopt;
    }
    const std::string shell = std::filesystem::path(argv[0]).filename().string();
    if (shell != "bash" && shell != "zsh") {
        why = "shell integration supports bash and zsh; '" + argv[0] + "' is neither";
        return std::nullopt;
    }
    bool login = false;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        const std::string& arg = argv[i];
        if (arg == "-l" || arg == "--login") {
            login = true;
        } else if (arg != "-i") {
            why = "shell integration needs an interactive " + shell + " with no options but -l, --login and -i; '" +
                  arg + "' (argument " + std::to_string(i) + ") is not one of them";
            return std::nullopt;
        }
    }

    IntegratedShell result;
    result.shell = shell;
    erase_key(env, kLoginVariable);
    erase_key(env, kUserZdotdirVariable);
    if (shell == "bash") {
        // bash reads no rcfile as a login shell: the script reads the login files itself.
        result.argv = {argv[0], "--rcfile", dir + "/bash/ptyvisor.bash", "-i"};
        if (login) env.push_back(std::string(kLoginVariable) + "=1");
    } else {
        result.argv = {argv[0], "-i"};
        if (login) result.argv.emplace_back("-l");
        const auto user_zdotdir = find_value(env, kZdotdirVariable);
        erase_key(env, kZdotdirVariable);
        env.push_back(std::string(kZdotdirVariable) + "=" + dir + "/zsh");
        if (user_zdotdir) env.push_back(std::string(kUserZdotdirVariable) + "=" + *user_zdotdir);
    }
    result.env = std::move(env);
    return result;
}

}  // namespace ptyvisor::server
