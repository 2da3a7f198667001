// DaemonProcess: the real ptyvisord, started from a generated TOML configuration, waited for
// through sd_notify's READY=1, and stopped with a signal under a bound.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "support/util.h"

namespace ptyvisor::itest {

struct DaemonConfig {
    std::string user;
    std::string socket;
    std::string backend = "direct";
    std::vector<std::string> allow_units;
    std::string unit_prefix = "ptyvisor";
    std::string state_directory;

    // [limits]
    long max_sessions = 16;
    long max_unauthenticated = 32;
    long max_unauthenticated_per_peer = 4;
    long admissions_per_minute = 120;
    long socket_buffer_bytes = 131072;
    long held_input_bytes = 262144;
    long output_buffer_bytes = 262144;
    long output_log_bytes = 2 * 1024 * 1024;

    // [timeouts], seconds
    double handshake = 5;
    double operation = 10;
    double drain = 2;
    double cleanup = 15;
    double retention = 300;
    double reattach = 30;
    std::string observer_group;
    std::string supervisor_group;

    // [screen]; 0: the daemon's default
    double screen_reply_timeout = 0;

    // [recording]; an empty directory: sessions are not recorded
    std::string recording_directory;
    long long recording_max_bytes = 64ll * 1024 * 1024;
    long long recording_max_total_bytes = 1ll << 30;
    long long recording_retention = 7 * 24 * 3600;  // seconds; 0: kept forever

    // [session.properties]
    std::map<std::string, std::string> properties;

    // Sandbox profiles: allowed_profiles, default_profile, and the [profiles.NAME] tables as
    // TOML text (written last).
    std::vector<std::string> allowed_profiles;
    std::string default_profile;
    std::string profiles_toml;

    // Not configuration: a library the daemon's process is started with (LD_PRELOAD), to
    // inject a fault. Empty: none.
    std::string preload;

    [[nodiscard]] std::string to_toml() const;
};

// How a child process ended, as waitid() reports it.
struct ExitInfo {
    int how = 0;     // CLD_EXITED, CLD_KILLED, CLD_DUMPED
    int status = 0;  // exit code or signal
    [[nodiscard]] bool exited_with(int code) const;
    [[nodiscard]] int shell() const { return shell_status(how, status); }
    [[nodiscard]] std::string describe() const;
};

class DaemonProcess {
public:
    // Writes the configuration into `dir`, starts the daemon with NOTIFY_SOCKET pointing into
    // `dir`, and waits up to `ready_timeout` for READY=1. On failure returns nullptr and
    // describes what went wrong in `error` (including the daemon's log).
    static std::unique_ptr<DaemonProcess> start(const DaemonConfig& config, const std::string& dir,
                                                std::string& error,
                                                Millis ready_timeout = Millis(20000));
    ~DaemonProcess();
    DaemonProcess(const DaemonProcess&) = delete;
    DaemonProcess& operator=(const DaemonProcess&) = delete;

    [[nodiscard]] pid_t pid() const { return pid_; }
    [[nodiscard]] int pidfd() const { return pidfd_.get(); }
    [[nodiscard]] bool running() const;

    // Sends `sig` and waits up to `timeout` for the daemon to exit. nullopt on timeout.
    std::optional<ExitInfo> stop(int sig, Millis timeout);
    // Waits up to `timeout` for the daemon to exit on its own.
    std::optional<ExitInfo> wait_exit(Millis timeout);

    [[nodiscard]] long fd_count() const { return count_fds(pid_); }
    // The daemon releases a closed connection's last resources on a later turn of its event
    // loop than the one that closed the socket (it may be inside that connection's callback),
    // and nothing outside the daemon can observe that turn. So a descriptor count taken right
    // after a peer saw EOF may still include them. This re-reads the count until it equals
    // `expected` or `timeout` passes, and returns the last count read: an assertion that the
    // count converges, within a bound, not a synchronisation.
    [[nodiscard]] long fd_count_converging_to(long expected, Millis timeout) const;
    // The count the daemon comes back to whenever no connection is open. Call it before the
    // first connection. Right after READY=1 the daemon may still hold two descriptors it is
    // about to close: sd_notify's datagram socket, and the O_PATH handle sd-event keeps for
    // a new inotify watch until its next prepare. Neither is open once the daemon sleeps in
    // epoll_wait, so this waits (up to 10 s) for that, and adds sd-event's CLOCK_MONOTONIC
    // timerfd if there is none yet: sd-event opens it with the first timer (a handshake's).
    // -1 if the daemon never sleeps in its loop or /proc does not say.
    [[nodiscard]] long idle_fd_count() const;
    // True once the daemon's only thread is blocked in epoll_wait (/proc/PID/syscall).
    [[nodiscard]] bool asleep_in_event_loop() const;
    [[nodiscard]] long rss_kib() const { return itest::rss_kib(pid_); }
    [[nodiscard]] std::string log() const { return read_text_file(log_path_); }
    [[nodiscard]] const std::string& log_path() const { return log_path_; }

private:
    DaemonProcess() = default;
    pid_t pid_ = -1;
    UniqueFd pidfd_;
    std::string log_path_;
    std::optional<ExitInfo> exit_;
};

}  // namespace ptyvisor::itest
