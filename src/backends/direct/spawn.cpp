#include "backends/direct/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/sched.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/linux.h"
#include "common/scheduling.h"

namespace ptyvisor::backends::direct {
namespace {

// What the child tells the parent when it fails: the step and errno.
enum class Step : int {
    Cgroup = 1, Setsid, ControllingTty, Stdio, Groups, Gid, Uid, Chdir, Exec, BoundingSet, NoNewPrivs, Nice
};

struct Failure {
    int step;
    int error;
};

[[noreturn]] void child_fail(int status_fd, Step step) {
    const Failure f{static_cast<int>(step), errno};
    [[maybe_unused]] const auto n = ::write(status_fd, &f, sizeof f);
    ::_exit(127);
}

std::string path_of(const std::vector<std::string>& env) {
    for (const auto& e : env)
        if (e.rfind("PATH=", 0) == 0) return e.substr(5);
    return "/usr/local/bin:/usr/bin:/bin";
}

// Candidate files for argv[0], in the order execvp would try them.
std::vector<std::string> exec_candidates(const std::string& name, const std::vector<std::string>& env) {
    if (name.find('/') != std::string::npos) return {name};
    std::vector<std::string> out;
    const std::string path = path_of(env);
    std::size_t at = 0;
    while (at <= path.size()) {
        const auto end = path.find(':', at);
        std::string file = path.substr(at, end == std::string::npos ? std::string::npos : end - at);
        if (file.empty()) file.push_back('.');
        file.push_back('/');
        file.append(name);
        out.push_back(std::move(file));
        if (end == std::string::npos) break;
        at = end + 1;
    }
    return out;
}

std::vector<char*> c_array(const std::vector<std::string>& v) {
    std::vector<char*> out;
    out.reserve(v.size() + 1);
    for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

// Drops every capability from the bounding set. The kernel answers EINVAL past its last
// capability, which ends the walk; the first capability must exist.
void drop_bounding_set(int status_fd) {
    for (unsigned long cap = 0; cap < 64; ++cap) {
        if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
        if (errno == EINVAL && cap > 0) return;
        child_fail(status_fd, Step::BoundingSet);
    }
}

// Runs in the child: never returns.
[[noreturn]] void become_session(const SessionSpec& spec, int status_fd,
                                 const std::vector<std::string>& candidates, char* const* argv,
                                 char* const* envp, const rlimit& nofile, int nice) {
    // The daemon raised its own descriptor limit; the command gets the usual one back.
    ::setrlimit(RLIMIT_NOFILE, &nofile);
    // And its CPU priority: the session is the agent's, never above it (raise_relay_priority).
    if (::setpriority(PRIO_PROCESS, 0, nice) < 0) child_fail(status_fd, Step::Nice);
    // The daemon blocks signals for sd-event; the command must start with a clean slate.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);

    if (::setsid() < 0) child_fail(status_fd, Step::Setsid);
    const int tty = spec.tty.get();
    if (::ioctl(tty, TIOCSCTTY, 0) < 0) child_fail(status_fd, Step::ControllingTty);
    for (int target = 0; target < 3; ++target)
        if (::dup2(tty, target) < 0) child_fail(status_fd, Step::Stdio);
    // Nothing of the daemon's may leak into the session, whatever flags it was opened with.
    ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
    // Never more powerful than the agent: empty the bounding set while we are still root
    // (dropping needs CAP_SETPCAP), so that no file capability can grant anything after the
    // switch below, and set no_new_privs, so that setuid/setgid bits and file capabilities
    // are ignored by every execve of the session and its descendants (sudo, su, ping...).
    drop_bounding_set(status_fd);
    // Raw system calls, not glibc's setgroups/setresgid/setresuid: this child comes from a
    // raw clone3, so glibc still believes it has the daemon's threads, and its wrappers would
    // signal each of them to change its credentials too and wait, on a futex, for answers
    // that never come while a worker thread exists. The child then hangs before exec,
    // holding a copy of every descriptor of the daemon (CrashSafety caught a client whose
    // connection outlived its SIGKILLed daemon that way). This process has one thread, so
    // the per-thread system call is the whole change.
    const auto& a = spec.account;
    if (::syscall(SYS_setgroups, a.groups.size(), a.groups.data()) < 0) child_fail(status_fd, Step::Groups);
    if (::syscall(SYS_setresgid, a.gid, a.gid, a.gid) < 0) child_fail(status_fd, Step::Gid);
    if (::syscall(SYS_setresuid, a.uid, a.uid, a.uid) < 0) child_fail(status_fd, Step::Uid);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) child_fail(status_fd, Step::NoNewPrivs);
    if (::fchdir(spec.cwd) < 0) child_fail(status_fd, Step::Chdir);
    int first_error = ENOENT;
    for (const auto& file : candidates) {
        ::execve(file.c_str(), argv, envp);
        // Like execvp: remember a more telling error than "not found" (EACCES) if one came.
        if (errno != ENOENT && errno != ENOTDIR) first_error = errno;
    }
    errno = first_error;
    child_fail(status_fd, Step::Exec);
}

// fork(), but born inside `cgroup_dir` when that is a cgroup directory fd, with a pidfd.
// Being born there (CLONE_INTO_CGROUP) avoids migrating a live process, which costs
// milliseconds of RCU synchronisation per session, and no instant exists at which the
// session's first process is outside its cgroup.
pid_t clone_into(int cgroup_dir, int& pidfd) {
    clone_args args{};
    args.flags = CLONE_PIDFD | (cgroup_dir >= 0 ? CLONE_INTO_CGROUP : 0);
    args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    args.cgroup = cgroup_dir >= 0 ? static_cast<std::uint64_t>(cgroup_dir) : 0;
    return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

// Where clone3 is filtered (seccomp returns ENOSYS, as systemd's @system-service does):
// fork, and the child joins its cgroup itself before anything else, so that no process of
// the session ever runs outside it.
pid_t fork_into(int cgroup_dir, int status_fd, int& pidfd) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (cgroup_dir >= 0) {
            const int procs = ::openat(cgroup_dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
            if (procs < 0 || ::write(procs, "0", 1) != 1) child_fail(status_fd, Step::Cgroup);
            ::close(procs);
        }
        return 0;
    }
    if (pid > 0) pidfd = pidfd_open(pid);  // unreaped, so the PID is still this child's
    return pid;
}

}  // namespace

Spawned spawn_session(const SessionSpec& spec, int cgroup_dir, std::string& why) {
    Spawned out;
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
        why = std::string("pipe: ") + std::strerror(errno);
        return out;
    }
    UniqueFd status_read(pipefd[0]), status_write(pipefd[1]);
    // The child writes a few bytes at most: a blocking write end is fine and simpler.
    ::fcntl(status_write.get(), F_SETFL, 0);

    const auto candidates = exec_candidates(spec.argv.front(), spec.env);
    const auto argv = c_array(spec.argv);
    const auto envp = c_array(spec.env);
    const rlimit nofile = original_nofile_limit();
    const int nice = original_nice();

    int pidfd = -1;
    pid_t pid = clone_into(cgroup_dir, pidfd);
    if (pid < 0 && (errno == ENOSYS || errno == EPERM)) pid = fork_into(cgroup_dir, status_write.get(), pidfd);
    if (pid < 0) {
        why = std::string("clone3: ") + std::strerror(errno);
        return out;
    }
    if (pid == 0)
        become_session(spec, status_write.get(), candidates, argv.data(), envp.data(), nofile, nice);
    out.pidfd.reset(pidfd);
    if (!out.pidfd) {
        why = std::string("pidfd_open: ") + std::strerror(errno);
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        return out;
    }
    out.pid = pid;
    out.exec_status = std::move(status_read);
    return out;
}

std::string describe_exec_failure(const unsigned char* data, std::size_t size, const std::string& command) {
    Failure f{};
    if (size < sizeof f) return "the session process failed before exec";
    std::memcpy(&f, data, sizeof f);
    const std::string err = std::strerror(f.error);
    switch (static_cast<Step>(f.step)) {
        case Step::Cgroup: return "cannot join the session cgroup: " + err;
        case Step::Setsid: return "setsid: " + err;
        case Step::ControllingTty: return "cannot acquire the terminal: " + err;
        case Step::Stdio: return "cannot attach the terminal: " + err;
        case Step::Groups:
        case Step::Gid:
        case Step::Uid: return "cannot switch to the account: " + err;
        case Step::Chdir: return "cannot enter the working directory: " + err;
        case Step::BoundingSet: return "cannot drop the capability bounding set: " + err;
        case Step::NoNewPrivs: return "cannot set no_new_privs: " + err;
        case Step::Nice: return "cannot restore the scheduling priority: " + err;
        case Step::Exec:
            if (f.error == ENOENT) return "command not found: " + command;
            return "cannot execute " + command + ": " + err;
    }
    return "the session process failed: " + err;
}

}  // namespace ptyvisor::backends::direct
