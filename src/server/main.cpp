// ptyvisord: the root daemon. Parses flags over the configuration file, cleans up what an
// earlier run left, listens, and serves until SIGTERM.
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <iostream>

#include "backends/factory.h"
#include "backends/systemd/systemd_backend.h"
#include "common/event.h"
#include "common/linux.h"
#include "common/log.h"
#include "common/process.h"
#include "common/scheduling.h"
#include "server/account.h"
#include "server/config.h"
#include "server/listener.h"
#include "server/server.h"
#include "server/session_handover.h"

namespace {

using namespace ptyvisor;

// The daemon's nice value (common/scheduling.h says why). It only ever uses the CPU that
// relaying its sessions' bytes takes, so it cannot starve the machine with it.
constexpr int kRelayNice = -10;

struct Flags {
    std::string config_path = server::kDefaultConfigPath;
    bool config_given = false;
    std::optional<std::string> socket, backend, user, state_directory;
    std::vector<std::string> allow_units;
    bool check_config = false;
    // For a re-exec (server_handover.cpp): our binary's path as it was at start (a package
    // upgrade replaces the file there), and our arguments.
    std::string binary;
    std::vector<std::string> argv;
};

// Loads the file (if any) and the flags over the defaults. False with `why`.
bool load_configuration(const Flags& flags, server::Config& config, std::string& why) {
    if (flags.config_given || ::access(flags.config_path.c_str(), F_OK) == 0)
        if (!server::load_config_file(flags.config_path, config, why)) return false;
    if (flags.socket) config.socket = *flags.socket;
    if (flags.backend) config.backend = *flags.backend;
    if (flags.user) config.user = *flags.user;
    if (flags.state_directory) config.state_directory = *flags.state_directory;
    if (!flags.allow_units.empty()) config.allow_units = flags.allow_units;
    if (!server::validate(config, why)) return false;
    if (!backends::validate_systemd_properties(config.session_properties, why)) {
        why = "[session.properties]: " + why;
        return false;
    }
    return true;
}

// Signals are events of the loop; the handlers are never run asynchronously. Blocked here,
// before any thread exists, so that every thread inherits the mask. Returns 0 or a negative
// errno.
int block_signals() {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    if (::sigprocmask(SIG_BLOCK, &mask, nullptr) < 0) return -errno;
    if (::signal(SIGPIPE, SIG_IGN) == SIG_ERR) return -errno;
    return 0;
}

// A session's processes run as the agent's account, so without Yama (ptrace_scope 1 or more)
// they may ptrace the agent itself and make it ask for a session: a session would get a
// session. START refuses a traced peer; a tracer that detaches before START is not seen.
// Said once at start, for the administrator (docs/security.md, docs/operations.md).
void warn_if_sessions_may_trace_the_agent() {
    const auto scope = read_small_file("/proc/sys/kernel/yama/ptrace_scope");
    if (scope && !scope->empty() && (*scope)[0] >= '1') return;
    log_warning("sessions may ptrace the agent's other processes: set kernel.yama.ptrace_scope to 1 or more",
                {{"PTRACE_SCOPE", scope ? scope->substr(0, scope->find('\n'))
                                        : "unknown (no Yama in this kernel, or /proc/sys hidden: ProcSubset=pid)"}});
}

int run(const Flags& flags) {
    server::Config config;
    std::string why;
    if (!load_configuration(flags, config, why)) {
        std::cerr << "ptyvisord: " << why << "\n";
        return 2;
    }
    backends::Account account;
    if (!server::resolve_account(config.user, account, why)) {
        std::cerr << "ptyvisord: " << why << "\n";
        return 2;
    }
    if (flags.check_config) {
        std::cout << "configuration OK: account " << config.user << " (uid " << account.uid << "), socket "
                  << config.socket << ", backend " << config.backend << "\n";
        return 0;
    }
    if (::geteuid() != 0) {
        std::cerr << "ptyvisord: must run as root\n";
        return 1;
    }

    if (const int r = block_signals(); r < 0) {
        log_error_errno(r, "cannot block SIGTERM, SIGINT and SIGHUP or ignore SIGPIPE");
        return 1;
    }
    raise_nofile_limit();
    if (const int r = raise_relay_priority(kRelayNice); r < 0)
        log_warning("cannot raise the relay's CPU priority; a flood of output will delay keystrokes",
                    {{"ERROR", std::strerror(-r)}});
    // Prompt as well as weighty: the loop runs for microseconds per wakeup, and a keystroke's
    // wakeup should not wait for a flooding session's time slice (common/scheduling.h).
    if (const int r = request_short_slice(); r < 0)
        log_warning("cannot ask for a short time slice; keystrokes may wait longer under load",
                    {{"ERROR", std::strerror(-r)}});

    sd_event* raw = nullptr;
    if (const int r = sd_event_new(&raw); r < 0) {
        log_error_errno(r, "cannot create the event loop");
        return 1;
    }
    EventLoop event(raw);

    backends::BackendOptions options;
    options.event = event.get();
    options.unit_prefix = config.unit_prefix;
    options.allowed_units = config.allow_units;
    options.state_directory = config.state_directory;
    auto backend = backends::make_backend(config.backend, options, why);
    if (!backend) {
        log_error("cannot start the backend", {{"BACKEND", config.backend}, {"ERROR", why}});
        return 1;
    }
    // What an earlier run handed over (server/session_handover.h) is taken back first, so
    // that cleanup_orphans() ends only what could not be.
    server::HandedOver handed;
    server::collect_handed_over(handed);
    const auto deadline = backends::Clock::now() +
                          std::chrono::duration_cast<backends::Clock::duration>(config.timeouts.cleanup);
    const std::string socket_path = config.socket;
    const gid_t socket_group = account.gid;
    server::Server srv(std::move(config), std::move(account), std::move(backend), event.get());
    srv.set_reexec(flags.binary, flags.argv);
    // Three descriptors per session (server/session_handover.h).
    if (const unsigned max = server::own_fd_store_max(); max >= 3) {
        srv.set_fd_store(true);
        log_info("keeping sessions in the fd store", {{"FD_STORE_MAX", std::to_string(max)}});
    }
    if (!handed.sessions.empty())
        log_info("sessions handed over", {{"TAKEN_BACK", std::to_string(srv.adopt(handed))}});
    warn_if_sessions_may_trace_the_agent();
    if (!srv.backend().cleanup_orphans(deadline, why)) {
        log_error("cannot clean up orphan sessions", {{"ERROR", why}});
        return 1;
    }
    UniqueFd listener = std::move(handed.listener);
    if (!listener && !server::open_listener(socket_path, socket_group, listener, why)) {
        log_error("cannot listen", {{"SOCKET", socket_path}, {"ERROR", why}});
        return 1;
    }
    if (srv.init(std::move(listener)) < 0) return 1;  // init() said what failed
    return srv.serve();
}

}  // namespace

int main(int argc, char** argv) {
    // Not dumpable, as sshd is: no core file or same-uid tracer ever sees what the daemon
    // relays. The direct backend's children make it so anyway at their first session: they
    // share this memory until exec, and their switch to the account clears the flag of that
    // memory (docs/security.md); this makes it so from the start, not from the first session.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    CLI::App app{"ptyvisord: supervises the PTY sessions of an AI agent's account"};
    app.set_version_flag("--version", PTYVISOR_VERSION);
    Flags flags;
    auto* config_opt = app.add_option("-c,--config", flags.config_path, "configuration file (TOML)")
                           ->capture_default_str();
    app.add_option("--socket", flags.socket, "listening socket path");
    app.add_option("--backend", flags.backend, "session backend")->check(CLI::IsMember({"auto", "systemd", "direct"}));
    app.add_option("--user", flags.user, "the agent's account");
    app.add_option("--allow-unit", flags.allow_units, "only the MainPID of this unit may connect (repeatable)");
    app.add_option("--state-directory", flags.state_directory, "where live sessions are recorded");
    app.add_flag("--check-config", flags.check_config, "validate the configuration and exit");
    const std::map<std::string, LogLevel> levels{{"error", LogLevel::Error},   {"warning", LogLevel::Warning},
                                                 {"notice", LogLevel::Notice}, {"info", LogLevel::Info},
                                                 {"debug", LogLevel::Debug}};
    std::string log_level = "info";
    app.add_option("--log-level", log_level, "the most detailed entries logged (debug: every stage change)")
        ->check(CLI::IsMember({"error", "warning", "notice", "info", "debug"}))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    set_log_level(levels.at(log_level));
    flags.argv.assign(argv, argv + argc);
    std::error_code ec;
    flags.binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    flags.config_given = config_opt->count() > 0;
    return run(flags);
}
