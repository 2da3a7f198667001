#include "support/daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/linux.h"

namespace ptyvisor::itest {
namespace {

std::string quote(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::string number(double v) {
    std::ostringstream s;
    s << v;
    std::string text = s.str();
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    return text;
}

std::atomic<int> g_daemon_serial{0};

}  // namespace

std::string DaemonConfig::to_toml() const {
    std::ostringstream t;
    t << "user = " << quote(user) << "\n";
    t << "socket = " << quote(socket) << "\n";
    t << "backend = " << quote(backend) << "\n";
    t << "allow_units = [";
    for (std::size_t i = 0; i < allow_units.size(); ++i)
        t << (i ? ", " : "") << quote(allow_units[i]);
    t << "]\n";
    t << "unit_prefix = " << quote(unit_prefix) << "\n";
    t << "state_directory = " << quote(state_directory) << "\n";
    if (!observer_group.empty()) t << "observer_group = " << quote(observer_group) << "\n";
    if (!supervisor_group.empty()) t << "supervisor_group = " << quote(supervisor_group) << "\n";
    if (!allowed_profiles.empty()) {
        t << "allowed_profiles = [";
        for (std::size_t i = 0; i < allowed_profiles.size(); ++i) t << (i ? ", " : "") << quote(allowed_profiles[i]);
        t << "]\n";
    }
    if (!default_profile.empty()) t << "default_profile = " << quote(default_profile) << "\n";
    t << "\n";
    t << "[limits]\n";
    t << "max_sessions = " << max_sessions << "\n";
    t << "max_unauthenticated = " << max_unauthenticated << "\n";
    t << "max_unauthenticated_per_peer = " << max_unauthenticated_per_peer << "\n";
    t << "admissions_per_minute = " << admissions_per_minute << "\n";
    t << "socket_buffer_bytes = " << socket_buffer_bytes << "\n";
    t << "held_input_bytes = " << held_input_bytes << "\n";
    t << "output_buffer_bytes = " << output_buffer_bytes << "\n";
    t << "output_log_bytes = " << output_log_bytes << "\n\n";
    t << "[timeouts]\n";
    t << "handshake = " << number(handshake) << "\n";
    t << "operation = " << number(operation) << "\n";
    t << "drain = " << number(drain) << "\n";
    t << "cleanup = " << number(cleanup) << "\n";
    t << "retention = " << number(retention) << "\n";
    t << "reattach = " << number(reattach) << "\n\n";
    t << "[recording]\n";
    t << "directory = " << quote(recording_directory) << "\n";
    t << "max_bytes = " << recording_max_bytes << "\n";
    // Only when a test sets it: a daemon from before the key (the attack tests run against
    // one to show they fail there) refuses keys it does not know.
    if (recording_max_total_bytes != DaemonConfig{}.recording_max_total_bytes)
        t << "max_total_bytes = " << recording_max_total_bytes << "\n";
    t << "retention = " << recording_retention << "\n";
    if (screen_reply_timeout > 0) t << "\n[screen]\nreply_timeout = " << number(screen_reply_timeout) << "\n";
    if (!properties.empty()) {
        t << "\n[session.properties]\n";
        for (const auto& [k, v] : properties) t << k << " = " << quote(v) << "\n";
    }
    if (!profiles_toml.empty()) t << "\n" << profiles_toml << "\n";
    return t.str();
}

bool ExitInfo::exited_with(int code) const { return how == CLD_EXITED && status == code; }

std::string ExitInfo::describe() const {
    if (how == CLD_EXITED) return "exited with " + std::to_string(status);
    return std::string("killed by signal ") + std::to_string(status) + " (" + ::strsignal(status) +
           ")";
}

std::unique_ptr<DaemonProcess> DaemonProcess::start(const DaemonConfig& config,
                                                    const std::string& dir, std::string& error,
                                                    Millis ready_timeout) {
    const int serial = ++g_daemon_serial;
    const std::string config_path = dir + "/ptyvisord-" + std::to_string(serial) + ".toml";
    const std::string notify_path = dir + "/notify-" + std::to_string(serial) + ".sock";
    std::unique_ptr<DaemonProcess> d(new DaemonProcess());
    d->log_path_ = dir + "/ptyvisord-" + std::to_string(serial) + ".log";
    write_text_file(config_path, config.to_toml());

    const std::string binary = daemon_binary();
    if (binary.empty() || ::access(binary.c_str(), X_OK) != 0) {
        error = "daemon binary not found (set PTYVISORD_BIN): '" + binary + "'";
        return nullptr;
    }

    UniqueFd notify(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (!notify || notify_path.size() >= sizeof addr.sun_path) {
        error = "cannot create the notify socket";
        return nullptr;
    }
    std::memcpy(addr.sun_path, notify_path.c_str(), notify_path.size() + 1);
    ::unlink(notify_path.c_str());
    if (::bind(notify.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        error = std::string("bind notify socket: ") + std::strerror(errno);
        return nullptr;
    }

    UniqueFd log(::open(d->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!log || !devnull) {
        error = "cannot open the daemon log";
        return nullptr;
    }

    std::vector<std::string> args{binary, "--config", config_path, "--backend", config.backend};
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, "NOTIFY_SOCKET=", 14) == 0 || std::strncmp(*e, "LISTEN_", 7) == 0)
            continue;
        env.emplace_back(*e);
    }
    env.push_back("NOTIFY_SOCKET=" + notify_path);
    if (!config.preload.empty()) {
        env.push_back("LD_PRELOAD=" + config.preload);
        // A sanitized daemon insists on its runtime coming first among the libraries: the
        // preloaded one comes first instead, harmlessly (it allocates nothing).
        const char* asan = std::getenv("ASAN_OPTIONS");
        std::erase_if(env, [](const std::string& e) { return e.starts_with("ASAN_OPTIONS="); });
        env.push_back(std::string("ASAN_OPTIONS=") + (asan ? std::string(asan) + ":" : "") +
                      "verify_asan_link_order=0");
    }
    CStrings argv(args);
    CStrings envp(env);

    const pid_t pid = ::fork();
    if (pid < 0) {
        error = std::string("fork: ") + std::strerror(errno);
        return nullptr;
    }
    if (pid == 0) {
        ::dup2(devnull.get(), 0);
        ::dup2(log.get(), 1);
        ::dup2(log.get(), 2);
        ::setpgid(0, 0);
        ::execve(argv.get()[0], argv.get(), envp.get());
        ::_exit(127);
    }
    d->pid_ = pid;
    d->pidfd_ = open_pidfd(pid);
    if (!d->pidfd_) {
        error = "pidfd_open of the daemon failed";
        return nullptr;
    }

    const auto deadline = Clock::now() + ready_timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
        if (left < 0) {
            error = "daemon did not send READY=1 within " +
                    std::to_string(ready_timeout.count()) + " ms; log:\n" + d->log();
            return nullptr;  // the destructor kills it
        }
        pollfd p[2] = {{notify.get(), POLLIN, 0}, {d->pidfd_.get(), POLLIN, 0}};
        const int n = ::poll(p, 2, static_cast<int>(left));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            error = std::string("poll: ") + std::strerror(errno);
            return nullptr;
        }
        if (p[0].revents & POLLIN) {
            char buf[4096];
            const ssize_t got = ::recv(notify.get(), buf, sizeof buf - 1, MSG_DONTWAIT);
            if (got > 0) {
                const std::string msg(buf, static_cast<std::size_t>(got));
                if (("\n" + msg + "\n").find("\nREADY=1\n") != std::string::npos) return d;
            }
            continue;
        }
        if (p[1].revents & POLLIN) {
            const auto info = d->wait_exit(Millis(0));
            error = "daemon exited before READY=1 (" + (info ? info->describe() : "?") +
                    "); log:\n" + d->log();
            return nullptr;
        }
    }
}

DaemonProcess::~DaemonProcess() {
    if (pid_ > 0 && !exit_) {
        if (!stop(SIGTERM, Millis(30000))) stop(SIGKILL, Millis(30000));
    }
}

long DaemonProcess::fd_count_converging_to(long expected, Millis timeout) const {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        const long n = fd_count();
        if (n == expected || Clock::now() >= deadline) return n;
        // Re-read every 10 ms; wakes at once if the daemon dies.
        if (wait_fd(pidfd_.get(), POLLIN, std::min(deadline, Clock::now() + Millis(10))) != 0)
            return fd_count();
    }
}

bool DaemonProcess::asleep_in_event_loop() const {
    // The first field of /proc/PID/syscall is the number of the system call the task is
    // blocked in; "running" otherwise. One thread only, or the answer would be its leader's.
    if (read_text_file("/proc/" + std::to_string(pid_) + "/status").find("\nThreads:\t1\n") ==
        std::string::npos)
        return false;
    std::istringstream in(read_text_file("/proc/" + std::to_string(pid_) + "/syscall"));
    long nr = -1;
    if (!(in >> nr)) return false;
    return nr == SYS_epoll_wait || nr == SYS_epoll_pwait
#ifdef SYS_epoll_pwait2
           || nr == SYS_epoll_pwait2
#endif
        ;
}

long DaemonProcess::idle_fd_count() const {
    const auto deadline = Clock::now() + Millis(10000);
    while (!asleep_in_event_loop()) {
        if (Clock::now() >= deadline) return -1;
        // Re-read every millisecond; wakes at once if the daemon dies.
        if (wait_fd(pidfd_.get(), POLLIN, std::min(deadline, Clock::now() + Millis(1))) != 0) return -1;
    }
    const std::string listing = fd_listing(pid_);
    const bool has_timer = listing.find("anon_inode:[timerfd]") != std::string::npos;
    return fd_count() + (has_timer ? 0 : 1);
}

bool DaemonProcess::running() const { return !exit_ && pidfd_ && ptyvisor::pidfd_alive(pidfd_.get()); }

std::optional<ExitInfo> DaemonProcess::stop(int sig, Millis timeout) {
    if (exit_) return exit_;
    ptyvisor::pidfd_send_signal(pidfd_.get(), sig);
    return wait_exit(timeout);
}

std::optional<ExitInfo> DaemonProcess::wait_exit(Millis timeout) {
    if (exit_) return exit_;
    if (!wait_pidfd_exit(pidfd_.get(), timeout)) return std::nullopt;
    siginfo_t info{};
    int rc;
    do {
        rc = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info,
                      WEXITED);
    } while (rc < 0 && errno == EINTR);
    if (rc != 0) return std::nullopt;
    exit_ = ExitInfo{info.si_code, info.si_status};
    return exit_;
}

}  // namespace ptyvisor::itest
