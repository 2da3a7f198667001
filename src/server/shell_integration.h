// Shell integration: an interactive bash or zsh started with the scripts of
// shell-integration/ (README.md there), which read the user's own startup files and then make
// the shell write OSC 133 and OSC 7 marks around each prompt and command.
//
// integrate_shell() only rewrites an argv and an environment; it reads no file. Invariants:
//  - It accepts exactly an interactive shell: argv[0]'s basename is bash or zsh, every other
//    argument is -l, --login or -i. Anything else (bash -c, a script, another shell or
//    option) is refused with a reason in `why`, argv and env untouched.
//  - The environment returned holds none of the variables the scripts read (PTYVISOR_*, and
//    ZDOTDIR for zsh) but the ones set here, so a client cannot steer the scripts through it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ptyvisor::server {

// The directory holding bash/ptyvisor.bash and zsh/: the source tree's shell-integration/
// for a daemon run from its build tree, else PREFIX/share/ptyvisor/shell-integration beside
// the daemon's PREFIX/sbin (the package installs under /usr whatever the configured prefix),
// else the configured datadir's.
std::string shell_integration_dir();

struct IntegratedShell {
    std::vector<std::string> argv;
    std::vector<std::string> env;  // KEY=VALUE
    std::string shell;             // "bash" or "zsh"
};

// argv: the command START asked for; env: its environment (KEY=VALUE); dir: from
// shell_integration_dir(). bash runs as [argv0, --rcfile, DIR/bash/ptyvisor.bash, -i], with
// PTYVISOR_SHELL_LOGIN=1 when it was asked to be a login shell; zsh as [argv0, -i] (and -l),
// with ZDOTDIR=DIR/zsh and the client's ZDOTDIR, if any, in PTYVISOR_USER_ZDOTDIR.
std::optional<IntegratedShell> integrate_shell(const std::vector<std::string>& argv,
                                               std::vector<std::string> env,
                                               const std::string& dir, std::string& why);

}  // namespace ptyvisor::server
