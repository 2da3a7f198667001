// ptyvisor: the command-line client of ptyvisord. This file only wires CLI11 to the
// subcommands; see run_command.h, status_command.h and session_commands.h.
#include <CLI/CLI.hpp>

#include "cli/audit_command.h"
#include "cli/exec_command.h"
#include "cli/mcp/mcp_command.h"
#include "cli/relay.h"
#include "cli/run_command.h"
#include "cli/screen_command.h"
#include "cli/session_commands.h"
#include "cli/standard_fds.h"
#include "cli/metrics_command.h"
#include "cli/status_command.h"
#include "cli/web_command.h"
#include "client/default_socket.h"

namespace {

using ptyvisor::cli::kFailure;

void add_socket_option(CLI::App& app, std::optional<std::string>& socket) {
    app.add_option("--socket", socket,
                   std::string("the daemon's socket (default: $") +
                       ptyvisor::client::kSocketEnvironmentVariable + ", else " +
                       ptyvisor::client::kDefaultSocketPath + ")");
}

void add_id(CLI::App& app, std::string& id) {
    app.add_option("id", id, "the session's id (32 hex digits, as run --detach and ls print it)")->required();
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
    run_cmd->add_flag("--shell-integration", run.shell_integration,
                      "COMMAND is bash or zsh (with -i, -l or --login at most): make it report its prompts "
                      "and commands, for exec, commands and wait --for command");
    run_cmd->add_option("--profile", run.profile,
                        "the sandbox profile to run under, one the daemon's configuration offers "
                        "(default: its default_profile)");
    run_cmd->add_option("command", run.command, "the command and its arguments (after --)")->required();
    // Everything from the command on is the command's, options included.
    run_cmd->positionals_at_end();

    ptyvisor::cli::StatusOptions status;
    auto* status_cmd = app.add_subcommand("status", "List live sessions and admission counters");
    add_socket_option(*status_cmd, status.socket);
    status_cmd->add_flag("--json", status.json, "print the daemon's JSON report as it is");

    ptyvisor::cli::MetricsOptions metrics;
    auto* metrics_cmd = app.add_subcommand("metrics", "Print the daemon's metrics in the OpenMetrics text format");
    add_socket_option(*metrics_cmd, metrics.socket);
    metrics_cmd->add_option("--textfile", metrics.textfile,
                            "write them, in the Prometheus text format, to this file atomically (for "
                            "node_exporter's textfile collector) instead of printing them");

    ptyvisor::cli::ListOptions list;
    auto* ls_cmd = app.add_subcommand("ls", "List sessions, running and recently exited");
    add_socket_option(*ls_cmd, list.socket);
    ls_cmd->add_flag("--json", list.json, "print a JSON array of sessions instead of a table");

    ptyvisor::cli::AttachOptions attach;
    auto* attach_cmd = app.add_subcommand(
        "attach", "Attach our terminal to a session, as run does; the detach keys leave it running");
    add_socket_option(*attach_cmd, attach.socket);
    auto* observe = attach_cmd->add_flag("--observe", attach.observe, "watch only: our input is not sent");
    attach_cmd->add_option("--from", attach.from,
                           "where the output begins: start (replay what the log holds), tail, or an offset")
        ->capture_default_str();
    attach_cmd->add_option("--detach-keys", attach.detach_keys,
                           "keys that detach: comma-separated ctrl-X or single characters, \"\" for none")
        ->capture_default_str();
    attach_cmd->add_flag("--takeover", attach.takeover, "take the place of the attached controller")
        ->excludes(observe);
    add_id(*attach_cmd, attach.id);

    ptyvisor::cli::LogsOptions logs;
    auto* logs_cmd = app.add_subcommand("logs", "Print a session's output, as its log holds it");
    add_socket_option(*logs_cmd, logs.socket);
    logs_cmd->add_option("--from", logs.from, "start, or a byte offset (tail with --follow)")->capture_default_str();
    logs_cmd->add_flag("-f,--follow", logs.follow, "then print new output as it comes, until the session ends");
    add_id(*logs_cmd, logs.id);

    ptyvisor::cli::SendOptions send;
    auto* send_cmd = app.add_subcommand("send", "Type text into a session without attaching");
    add_socket_option(*send_cmd, send.socket);
    send_cmd->add_flag("--keys", send.keys,
                       "tmux send-keys style: each argument is a key name (Enter, C-c, M-x, Up, F1, ...) "
                       "or text, sent one after the other without spaces");
    add_id(*send_cmd, send.id);
    send_cmd->add_option("text", send.text, "the text, joined by spaces (after the id)")->required();
    // After the id, every argument is text, "-x" included.
    send_cmd->positionals_at_end();

    ptyvisor::cli::WaitOptions wait;
    auto* wait_cmd = app.add_subcommand("wait", "Wait for a session to exit, go quiet or print a text");
    add_socket_option(*wait_cmd, wait.socket);
    wait_cmd->add_option("--timeout", wait.timeout, "give up after this many seconds, with status 124");
    wait_cmd->add_option("--for", wait.condition,
                         "exit, quiet:MS, text:REGEX (RE2 over the raw output), command (a command ends; its "
                         "record is printed), prompt (the shell is at its prompt) or input (the program waits "
                         "for input)")
        ->capture_default_str();
    wait_cmd->add_option("--from", wait.from, "for text: search from start (default), tail or an offset");
    wait_cmd->add_option("--after", wait.after,
                         "for command: a command whose seq is greater than this ends (default: the next to end)");
    add_id(*wait_cmd, wait.id);

    ptyvisor::cli::ExecOptions exec;
    auto* exec_cmd = app.add_subcommand(
        "exec", "Run a command line in a session's shell (started with --shell-integration): print its output, "
                "exit with its status");
    add_socket_option(*exec_cmd, exec.socket);
    exec_cmd->add_option("--timeout", exec.timeout,
                         "give up after this many seconds, with status 124 (the command goes on)");
    exec_cmd->add_flag("--interrupt", exec.interrupt, "at the timeout, press Ctrl-C and wait up to 5 s for its end");
    exec_cmd->add_flag("--json", exec.json,
                       "print one JSON object {exit_code, state, output, truncated, seq} instead of the output");
    add_id(*exec_cmd, exec.id);
    exec_cmd->add_option("command", exec.command, "the command line, its words joined by spaces (after --)")
        ->required();
    exec_cmd->positionals_at_end();

    ptyvisor::cli::CommandsOptions commands;
    auto* commands_cmd = app.add_subcommand("commands", "List the commands a session's shell has run");
    add_socket_option(*commands_cmd, commands.socket);
    commands_cmd->add_flag("--json", commands.json, "print the daemon's JSON reply (records with their log offsets)");
    commands_cmd->add_option("--since", commands.since, "only the commands whose seq is greater than this");
    add_id(*commands_cmd, commands.id);

    ptyvisor::cli::KillOptions kill;
    auto* kill_cmd = app.add_subcommand("kill", "End a session, or send a signal to its processes");
    add_socket_option(*kill_cmd, kill.socket);
    kill_cmd->add_option("-s,--signal", kill.signal,
                         "signal every process of the session (TERM, SIGINT, KILL, 9, ...) instead of ending it");
    add_id(*kill_cmd, kill.id);

    ptyvisor::cli::ScreenOptions screen;
    auto* screen_cmd = app.add_subcommand("screen", "Print what a session's terminal shows now, as tmux capture-pane -p");
    add_socket_option(*screen_cmd, screen.socket);
    screen_cmd->add_flag("--json", screen.json, "print the daemon's JSON reply (cursor, title, alternate screen, ...)");
    screen_cmd->add_option("--scrollback", screen.scrollback, "also the last N lines that scrolled off (at most 1000 are kept)")
        ->check(CLI::Range(0, 10000));
    screen_cmd->add_flag("--attributes", screen.attributes, "with --json: the cells' colours and styles");
    add_id(*screen_cmd, screen.id);

    ptyvisor::cli::mcp::McpOptions mcp{{}, PTYVISOR_VERSION};
    auto* mcp_cmd = app.add_subcommand(
        "mcp", "Serve MCP on stdin/stdout: tools for an AI agent to run and drive terminal sessions");
    add_socket_option(*mcp_cmd, mcp.socket);

    ptyvisor::cli::WebOptions web{{}, {}, {}, {}, PTYVISOR_VERSION};
    auto* web_cmd = app.add_subcommand(
        "web", "Serve the supervision console: a web page that watches sessions and may take their terminal");
    add_socket_option(*web_cmd, web.socket);
    auto* web_listen = web_cmd->add_option("--listen", web.listen, "HOST:PORT to listen on (default 127.0.0.1:8650; port 0 picks one)");
    web_cmd->add_option("--unix", web.unix_path, "listen on this Unix socket instead (0600), for a reverse proxy")
        ->excludes(web_listen);
    web_cmd->add_option("--token-file", web.token_file,
                        "read the token from this file's first line (yours, mode 0600) instead of making one");

    ptyvisor::cli::AuditOptions audit;
    auto* audit_cmd = app.add_subcommand(
        "audit", "Print the daemon's audit records (root; the journal's readers), oldest first");
    audit_cmd->add_option("--session", audit.session, "only this session's records");
    audit_cmd->add_option("--since", audit.since,
                          "only records from this time on: ISO 8601 (2026-12-02T14:00:00Z; no zone: local "
                          "time), @SECONDS, or relative (-10min, -2h, -1d)");
    audit_cmd->add_flag("--json", audit.json, "one JSON object a line instead of a table");
    audit_cmd->add_option("--file", audit.file,
                          std::string("read this JSON-lines audit file instead of the journal (default: ") +
                              ptyvisor::cli::kDefaultAuditFile + " when it exists)");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : kFailure;
    }
    if (*run_cmd) return ptyvisor::cli::run_command(run);
    if (*ls_cmd) return ptyvisor::cli::list_command(list);
    if (*attach_cmd) return ptyvisor::cli::attach_command(attach);
    if (*logs_cmd) return ptyvisor::cli::logs_command(logs);
    if (*send_cmd) return ptyvisor::cli::send_command(send);
    if (*wait_cmd) return ptyvisor::cli::wait_command(wait);
    if (*exec_cmd) return ptyvisor::cli::exec_command(exec);
    if (*commands_cmd) return ptyvisor::cli::commands_command(commands);
    if (*kill_cmd) return ptyvisor::cli::kill_command(kill);
    if (*screen_cmd) return ptyvisor::cli::screen_command(screen);
    if (*mcp_cmd) return ptyvisor::cli::mcp::mcp_command(mcp);
    if (*web_cmd) return ptyvisor::cli::web_command(web);
    if (*audit_cmd) return ptyvisor::cli::audit_command(audit);
    if (*metrics_cmd) return ptyvisor::cli::metrics_command(metrics);
    return ptyvisor::cli::status_command(status);
}
