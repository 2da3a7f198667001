// ptyvisor: the command-line client of ptyvisord. This file only wires CLI11 to the
// subcommands; see run_command.h and status_command.h.
#include <CLI/CLI.hpp>

#include "cli/relay.h"
#include "cli/run_command.h"
#include "cli/standard_fds.h"
#include "cli/status_command.h"
#include "client/default_socket.h"

namespace {

using ptyvisor::cli::kFailure;

void add_socket_option(CLI::App& app, std::optional<std::string>& socket) {
    app.add_option("--socket", socket,
                   std::string("the daemon's socket (default: $") +
                       ptyvisor::client::kSocketEnvironmentVariable + ", else " +
                       ptyvisor::client::kDefaultSocketPath + ")");
}

}  // namespace

int main(int argc, char** argv) {
    ptyvisor::cli::ensure_standard_fds();
    CLI::App app{"ptyvisor: run commands on terminals supervised by ptyvisord"};
    app.set_version_flag("--version", "ptyvisor " PTYVISOR_VERSION);
    app.require_subcommand(1);

    ptyvisor::cli::RunOptions run;
    auto* run_cmd = app.add_subcommand("run", "Run a command on a new terminal session, like ssh -t");
    add_socket_option(*run_cmd, run.socket);
    run_cmd->add_option("-C,--directory", run.directory, "working directory (default: the current one)");
    run_cmd->add_option("-e,--env", run.env_settings, "set NAME=VALUE in the session's environment")
        ->allow_extra_args(false);
    run_cmd->add_flag("--clean-env", run.clean_env, "start from an empty environment instead of ours");
    run_cmd->add_option("--size", run.size, "terminal size COLSxROWS (default: our terminal's, else 80x24)");
    run_cmd->add_option("--term", run.term, "TERM for the session (default: our TERM, else dumb)");
    run_cmd->add_flag("-q,--quiet", run.quiet, "do not report how a session ended");
    run_cmd->add_flag("-d,--detach", run.detach,
                      "start the session in the background: print its id and exit once it runs");
    run_cmd->add_option("command", run.command, "the command and its arguments (after --)")->required();
    // Everything from the command on is the command's, options included.
    run_cmd->positionals_at_end();

    ptyvisor::cli::StatusOptions status;
    auto* status_cmd = app.add_subcommand("status", "List live sessions and admission counters");
    add_socket_option(*status_cmd, status.socket);
    status_cmd->add_flag("--json", status.json, "print the daemon's JSON report as it is");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : kFailure;
    }
    if (*run_cmd) return ptyvisor::cli::run_command(run);
    return ptyvisor::cli::status_command(status);
}
