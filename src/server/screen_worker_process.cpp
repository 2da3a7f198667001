#include "server/screen_worker_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <utility>

#include "common/log.h"
#include "server/screen_identity.h"

extern char** environ;

namespace ptyvisor::server {

namespace {

constexpr int kWorkerSocket = 3;  // the worker's end, in the worker

}  // namespace

std::string ScreenWorkerProcess::installed_path() {
    // Beside the daemon first (a build tree), then where an install under the daemon's own
    // prefix puts it (PREFIX/sbin/ptyvisord, PREFIX/libexec/ptyvisor/ptyvisor-screen: the
    // package installs under /usr whatever prefix the build was configured with), then the
    // libexec directory of the build's prefix.
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const auto dir = self.parent_path();
        for (const auto& candidate : {dir / "ptyvisor-screen", dir.parent_path() / "libexec/ptyvisor/ptyvisor-screen"})
            if (std::filesystem::exists(candidate, ec)) return candidate;
    }
    return PTYVISOR_LIBEXECDIR "/ptyvisor/ptyvisor-screen";
}

ScreenWorkerProcess::ScreenWorkerProcess(sd_event* event, Options options, Hooks hooks)
    : event_(event), options_(std::move(options)), hooks_(std::move(hooks)) {
    if (options_.path.empty()) options_.path = installed_path();
}

ScreenWorkerProcess::~ScreenWorkerProcess() {
    pidfd_source_.reset();
    if (pidfd_) ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);  // SIGKILLed: gone at once
}

void ScreenWorkerProcess::start() {
    UniqueFd socket;
    std::string why;
    if (!spawn(socket, why)) {
        log_error("cannot start the screen worker", {{"ERROR", why}});
        schedule_restart();
        return;
    }
    log_info("screen worker started", {{"WORKER_PID", std::to_string(pid_)}});
    hooks_.started(std::move(socket));
}

bool ScreenWorkerProcess::spawn(UniqueFd& socket, std::string& why) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) < 0)
        return why = std::string("socketpair: ") + std::strerror(errno), false;
    UniqueFd ours(pair[0]), theirs(pair[1]);
    // The worker's end is blocking: it waits in recvmsg for work.
    ::fcntl(theirs.get(), F_SETFL, 0);
    if (theirs.get() == kWorkerSocket) theirs.reset(::fcntl(pair[1], F_DUPFD_CLOEXEC, 10));
    const std::string& path = options_.path;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&actions, theirs.get(), kWorkerSocket);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    // An account the administrator chose, or a uid of the worker's own (screen_identity.h),
    // picked once: /proc is read then, not at every restart.
    const std::string& account = options_.user;
    if (account.empty() && !uid_) {
        uid_t uid = 0;
        if (!pick_screen_uid(system_uid_probe(), uid, why)) {
            posix_spawn_file_actions_destroy(&actions);
            posix_spawnattr_destroy(&attr);
            return false;
        }
        uid_ = uid;
        log_info("the screen worker runs as a uid of its own", {{"WORKER_UID", std::to_string(uid)}});
    }
    const std::string uid_text = uid_ ? std::to_string(*uid_) : std::string();
    const char* argv[] = {path.c_str(), account.empty() ? "--uid" : "--user",
                          account.empty() ? uid_text.c_str() : account.c_str(), nullptr};
    pid_t pid = 0;
    const int e = ::posix_spawn(&pid, path.c_str(), &actions, &attr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (e != 0) return why = path + ": " + std::strerror(e), false;
    pid_ = pid;
    pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    ++starts_;
    started_usec_ = now_usec(event_);
    const int r = pidfd_ ? add_io(event_, pidfd_source_, pidfd_.get(), EPOLLIN, [this](std::uint32_t) { exited(); })
                         : -EBADF;
    if (r < 0) {
        kill("cannot watch it");
        return why = "cannot watch the worker", false;
    }
    socket = std::move(ours);
    return true;
}

void ScreenWorkerProcess::kill(const char* why, bool blame) {
    if (!pid_) return;
    log_warning("killing the screen worker", {{"WORKER_PID", std::to_string(pid_)}, {"REASON", why}});
    if (!pidfd_) ::kill(pid_, SIGKILL);
    gone(blame);
}

void ScreenWorkerProcess::exited() {
    if (!pid_) return;
    log_warning("the screen worker exited", {{"WORKER_PID", std::to_string(pid_)}});
    gone(true);
}

void ScreenWorkerProcess::gone(bool blame) {
    // Killed whatever brought us here: a worker that only closed its socket must not be
    // waited for.
    if (pidfd_) ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    pidfd_source_.reset();
    deadline_timer_.reset();
    if (pid_ > 0) {
        // Killed or exited: reaped now if it is gone, else by the next start's check. A
        // SIGKILLed process is gone within the scheduler's next tick.
        siginfo_t info{};
        if (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED) < 0 && errno == EINVAL)
            ::waitpid(pid_, nullptr, 0);
    }
    pidfd_.reset();
    pid_ = 0;
    const auto lived = now_usec(event_) - started_usec_;
    backoff_usec_ = lived >= kStableUsec ? kFirstBackoffUsec : std::min(backoff_usec_ * 2, kMaxBackoffUsec);
    hooks_.gone(blame);
    schedule_restart();
}

void ScreenWorkerProcess::schedule_restart() {
    if (hooks_.shutting_down && hooks_.shutting_down()) return;
    const int r = rearm_timer(event_, restart_timer_, backoff_usec_, [this] {
        restart_timer_.reset();
        if (!pid_) start();
    });
    if (r < 0) log_error_errno(r, "cannot arm the screen worker's restart");
}

// ---- The reply deadline --------------------------------------------------------------------

void ScreenWorkerProcess::arm_deadline() {
    deadline_cpu_usec_ = cpu_usec();
    deadline_wall_usec_ = now_usec(event_);
    rearm_deadline(options_.reply_timeout_usec);
}

void ScreenWorkerProcess::rearm_deadline(std::uint64_t usec) {
    const int r = rearm_timer(event_, deadline_timer_, usec, [this] { on_deadline(); });
    if (r < 0) log_error_errno(r, "cannot arm the screen worker's deadline");
}

void ScreenWorkerProcess::on_deadline() {
    const std::uint64_t timeout = options_.reply_timeout_usec;
    const std::uint64_t cpu = cpu_usec() - deadline_cpu_usec_;
    const std::uint64_t wall = now_usec(event_) - deadline_wall_usec_;
    // A starved worker is killed without blame, but what it spent counts: work that needs
    // more CPU than the timeout must not escape for good on a busy machine, where every
    // attempt is cut short by the clock before it uses the timeout's worth.
    const std::uint64_t spent = cpu + hooks_.carried_cpu_usec();
    if (spent >= timeout) return kill("it spent its reply timeout's worth of CPU on one piece of work", true);
    if (wall >= kStuckFactor * timeout) {
        hooks_.starved(spent);
        return kill("it did not answer, nor use the CPU, in time");
    }
    rearm_deadline(std::max<std::uint64_t>(timeout - spent, 100'000));
}

std::uint64_t ScreenWorkerProcess::cpu_usec() const {
    // The kernel's per-process CPU clock; a worker gone or unreadable counts as having used
    // none (its exit is seen on its pidfd).
    clockid_t clock{};
    timespec ts{};
    if (pid_ <= 0 || ::clock_getcpuclockid(pid_, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) return 0;
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<std::uint64_t>(ts.tv_nsec) / 1000;
}

}  // namespace ptyvisor::server
