#include "server/shell_integration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

namespace ptyvisor::server {
namespace {

using Strings = std::vector<std::string>;

const std::string kDir = "/usr/share/ptyvisor/shell-integration";

IntegratedShell integrate(const Strings& argv, Strings env = {}) {
    std::string why;
    auto shell = integrate_shell(argv, std::move(env), kDir, why);
    EXPECT_TRUE(shell) << why;
    return shell ? *shell : IntegratedShell{};
}

std::string refusal(const Strings& argv) {
    std::string why;
    const Strings env = {"HOME=/home/u"};
    EXPECT_FALSE(integrate_shell(argv, env, kDir, why));
    return why;
}

TEST(ShellIntegration, BashReadsTheScriptAsItsRcfile) {
    const auto shell = integrate({"/bin/bash"}, {"HOME=/home/u", "TERM=xterm"});
    EXPECT_EQ(shell.shell, "bash");
    EXPECT_EQ(shell.argv, (Strings{"/bin/bash", "--rcfile", kDir + "/bash/ptyvisor.bash", "-i"}));
    EXPECT_EQ(shell.env, (Strings{"HOME=/home/u", "TERM=xterm"}));
}

TEST(ShellIntegration, BashLoginIsAskedForThroughTheEnvironment) {
    for (const auto* option : {"-l", "--login"}) {
        const auto shell = integrate({"bash", "-i", option}, {"HOME=/home/u"});
        EXPECT_EQ(shell.argv, (Strings{"bash", "--rcfile", kDir + "/bash/ptyvisor.bash", "-i"}));
        EXPECT_EQ(shell.env, (Strings{"HOME=/home/u", "PTYVISOR_SHELL_LOGIN=1"}));
    }
}

TEST(ShellIntegration, TheClientCannotSetTheScriptsVariables) {
    const auto shell = integrate({"bash"}, {"PTYVISOR_SHELL_LOGIN=1", "A=1", "PTYVISOR_USER_ZDOTDIR=/x"});
    EXPECT_EQ(shell.env, (Strings{"A=1"}));
    const auto zsh = integrate({"zsh"}, {"PTYVISOR_USER_ZDOTDIR=/x", "PTYVISOR_SHELL_LOGIN=1"});
    EXPECT_EQ(zsh.env, (Strings{"ZDOTDIR=" + kDir + "/zsh"}));
}

TEST(ShellIntegration, ZshReadsOurZdotdirAndIsToldTheUsers) {
    const auto shell = integrate({"/usr/bin/zsh"}, {"HOME=/home/u", "ZDOTDIR=/home/u/.config/zsh"});
    EXPECT_EQ(shell.shell, "zsh");
    EXPECT_EQ(shell.argv, (Strings{"/usr/bin/zsh", "-i"}));
    EXPECT_EQ(shell.env,
              (Strings{"HOME=/home/u", "ZDOTDIR=" + kDir + "/zsh", "PTYVISOR_USER_ZDOTDIR=/home/u/.config/zsh"}));
}

TEST(ShellIntegration, ZshWithoutZdotdirGetsNoUserZdotdir) {
    const auto shell = integrate({"zsh", "-l"}, {"HOME=/home/u"});
    EXPECT_EQ(shell.argv, (Strings{"zsh", "-i", "-l"}));
    EXPECT_EQ(shell.env, (Strings{"HOME=/home/u", "ZDOTDIR=" + kDir + "/zsh"}));
}

TEST(ShellIntegration, ZshTakesTheZdotdirTheShellWouldHaveSeen) {
    // getenv() returns the first of two entries; both go, ours is the only one left.
    const auto shell = integrate({"zsh"}, {"ZDOTDIR=/first", "ZDOTDIR=/second"});
    EXPECT_EQ(shell.env, (Strings{"ZDOTDIR=" + kDir + "/zsh", "PTYVISOR_USER_ZDOTDIR=/first"}));
}

TEST(ShellIntegration, ZshKeepsAnEmptyUserZdotdir) {
    const auto shell = integrate({"zsh"}, {"ZDOTDIR="});
    EXPECT_EQ(shell.env, (Strings{"ZDOTDIR=" + kDir + "/zsh", "PTYVISOR_USER_ZDOTDIR="}));
}

TEST(ShellIntegration, RefusesWhatIsNotAnInteractiveShell) {
    EXPECT_EQ(refusal({"bash", "-c", "echo hi"}),
              "shell integration needs an interactive bash with no options but -l, --login and -i; "
              "'-c' (argument 1) is not one of them");
    EXPECT_EQ(refusal({"zsh", "-i", "script.zsh"}),
              "shell integration needs an interactive zsh with no options but -l, --login and -i; "
              "'script.zsh' (argument 2) is not one of them");
    EXPECT_NE(refusal({"bash", "--norc"}).find("'--norc'"), std::string::npos);
    EXPECT_NE(refusal({"bash", "-il"}).find("'-il'"), std::string::npos);
    EXPECT_EQ(refusal({"/bin/sh"}), "shell integration supports bash and zsh; '/bin/sh' is neither");
    EXPECT_EQ(refusal({"/usr/bin/bash5"}), "shell integration supports bash and zsh; '/usr/bin/bash5' is neither");
    EXPECT_EQ(refusal({"/bin/"}), "shell integration supports bash and zsh; '/bin/' is neither");
    EXPECT_EQ(refusal({}), "shell integration needs a shell to start: the command is empty");
    EXPECT_EQ(refusal({""}), "shell integration needs a shell to start: the command is empty");
}

TEST(ShellIntegration, TheDirectoryHoldsTheScripts) {
    // The test runs from the build tree: the scripts are the source tree's.
    const std::filesystem::path dir = shell_integration_dir();
    EXPECT_TRUE(std::filesystem::is_regular_file(dir / "bash/ptyvisor.bash")) << dir;
    for (const auto* file : {".zshenv", ".zprofile", ".zshrc", ".zlogin"})
        EXPECT_TRUE(std::filesystem::is_regular_file(dir / "zsh" / file)) << dir << " " << file;
}

}  // namespace
}  // namespace ptyvisor::server
