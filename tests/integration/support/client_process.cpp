#include "support/client_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/linux.h"

namespace ptyvisor::itest {
namespace {

bool make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    read_end.reset(fds[0]);
    write_end.reset(fds[1]);
    return true;
}

std::string escaped(const std::string& s) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '\n') {
            out += "\\n\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        } else {
            out += ch;
        }
    }
    return out;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

std::unique_ptr<ClientProcess> ClientProcess::spawn(const std::string& binary,
                                                    const std::vector<std::string>& args,
                                                    const Account& account,
                                                    const ClientOptions& options,
                                                    std::string& error) {
    if (binary.empty() || ::access(binary.c_str(), X_OK) != 0) {
        error = "client binary not found (set PTYVISOR_BIN): '" + binary + "'";
        return nullptr;
    }
    std::unique_ptr<ClientProcess> c(new ClientProcess());
    UniqueFd child_in, child_out, child_err;
    std::string slave_path;

    if (!make_pipe(c->err_fd_, child_err)) {
        error = "pipe failed";
        return nullptr;
    }
    if (options.stdin_mode == ClientOptions::Stdin::Pty) {
        c->pty_ = true;
        UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
        char name[128];
        if (!master || ::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0 ||
            ::ptsname_r(master.get(), name, sizeof name) != 0) {
            error = std::string("cannot allocate a PTY: ") + std::strerror(errno);
            return nullptr;
        }
        slave_path = name;
        if (::chown(name, account.uid, static_cast<gid_t>(-1)) != 0) {
            error = std::string("chown ") + name + ": " + std::strerror(errno);
            return nullptr;
        }
        winsize ws{};
        ws.ws_row = options.pty_rows;
        ws.ws_col = options.pty_cols;
        ::ioctl(master.get(), TIOCSWINSZ, &ws);
        c->out_fd_.reset(::fcntl(master.get(), F_DUPFD_CLOEXEC, 3));
        c->in_fd_ = std::move(master);
    } else {
        if (!make_pipe(c->out_fd_, child_out)) {
            error = "pipe failed";
            return nullptr;
        }
        if (options.stdin_mode == ClientOptions::Stdin::Pipe) {
            if (!make_pipe(child_in, c->in_fd_)) {
                error = "pipe failed";
                return nullptr;
            }
        } else {
            child_in.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        }
    }

    std::vector<std::string> full{binary};
    full.insert(full.end(), args.begin(), args.end());
    CStrings argv(full);
    CStrings envp(options.env);
    const gid_t groups[1] = {account.gid};
    const std::string cwd = options.cwd.empty() ? std::string("/") : options.cwd;

    const pid_t pid = ::fork();
    if (pid < 0) {
        error = std::string("fork: ") + std::strerror(errno);
        return nullptr;
    }
    if (pid == 0) {
        // Only async-signal-safe calls from here on.
        ::setsid();
        if (!slave_path.empty()) {
            const int slave = ::open(slave_path.c_str(), O_RDWR);
            if (slave < 0) ::_exit(126);
            ::ioctl(slave, TIOCSCTTY, 0);
            ::dup2(slave, 0);
            ::dup2(slave, 1);
            if (slave > 2) ::close(slave);
        } else {
            ::dup2(child_in.get(), 0);
            ::dup2(child_out.get(), 1);
        }
        ::dup2(child_err.get(), 2);
        if (!drop_privileges(account.uid, account.gid, std::span<const gid_t>(groups, 1)))
            ::_exit(125);
        if (::chdir(cwd.c_str()) != 0) ::_exit(124);
        ::signal(SIGPIPE, SIG_DFL);
        ::execve(argv.get()[0], argv.get(), envp.get());
        ::_exit(127);
    }
    c->pid_ = pid;
    c->pidfd_ = open_pidfd(pid);
    if (c->in_fd_) set_nonblocking(c->in_fd_.get());
    if (c->out_fd_) set_nonblocking(c->out_fd_.get());
    set_nonblocking(c->err_fd_.get());
    return c;
}

ClientProcess::~ClientProcess() {
    if (pid_ > 0 && !exit_) {
        ptyvisor::pidfd_send_signal(pidfd_.get(), SIGKILL);
        if (wait_pidfd_exit(pidfd_.get(), Millis(10000))) reap();
    }
}

void ClientProcess::reap() {
    if (exit_) return;
    siginfo_t info{};
    int rc;
    do {
        rc = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info,
                      WEXITED | WNOHANG);
    } while (rc < 0 && errno == EINTR);
    if (rc == 0 && info.si_pid != 0) exit_ = ExitInfo{info.si_code, info.si_status};
}

bool ClientProcess::pump(Clock::time_point deadline, int extra_fd, short extra_events,
                         short* extra_revents) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    if (left < 0) return false;
    pollfd p[4];
    int n = 0;
    int i_out = -1, i_err = -1, i_pid = -1, i_extra = -1;
    if (out_fd_) { i_out = n; p[n++] = {out_fd_.get(), POLLIN, 0}; }
    if (err_fd_) { i_err = n; p[n++] = {err_fd_.get(), POLLIN, 0}; }
    if (!exit_) { i_pid = n; p[n++] = {pidfd_.get(), POLLIN, 0}; }
    if (extra_fd >= 0) { i_extra = n; p[n++] = {extra_fd, extra_events, 0}; }
    if (n == 0) return false;
    const int r = ::poll(p, static_cast<nfds_t>(n), static_cast<int>(left));
    if (r < 0 && errno == EINTR) return true;
    if (r <= 0) return false;

    auto drain = [](UniqueFd& fd, std::string& into) {
        char buf[65536];
        for (;;) {
            const ssize_t got = ::read(fd.get(), buf, sizeof buf);
            if (got > 0) {
                into.append(buf, static_cast<std::size_t>(got));
                continue;
            }
            if (got < 0 && errno == EINTR) continue;
            if (got < 0 && errno == EAGAIN) return;
            fd.reset();  // EOF, or EIO from a PTY master whose slave is gone
            return;
        }
    };
    if (i_out >= 0 && p[i_out].revents != 0) drain(out_fd_, out_);
    if (i_err >= 0 && p[i_err].revents != 0) drain(err_fd_, err_);
    if (i_pid >= 0 && (p[i_pid].revents & POLLIN)) reap();
    if (extra_revents != nullptr) *extra_revents = i_extra >= 0 ? p[i_extra].revents : 0;
    return true;
}

bool ClientProcess::write_input(const std::string& bytes, Millis timeout) {
    if (!in_fd_) return false;
    const auto deadline = Clock::now() + timeout;
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(in_fd_.get(), bytes.data() + done, bytes.size() - done);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN) return false;
        short revents = 0;
        if (!pump(deadline, in_fd_.get(), POLLOUT, &revents)) return false;
        if (revents & (POLLERR | POLLHUP)) return false;
    }
    return true;
}

void ClientProcess::close_input() {
    if (!pty_) in_fd_.reset();
}

bool ClientProcess::read_until(const std::function<bool(const std::string&)>& done,
                               Millis timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!done(out_)) {
        if (!pump(deadline)) break;
    }
    return done(out_);
}

bool ClientProcess::wait_for_output(const std::string& needle, Millis timeout) {
    const std::string plain = without_cr(needle);
    return read_until(
        [&](const std::string& s) { return without_cr(s).find(plain) != std::string::npos; },
        timeout);
}

std::optional<ExitInfo> ClientProcess::wait_exit(Millis timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!exit_ || outputs_open()) {
        if (!pump(deadline)) break;
    }
    return exit_;
}

bool ClientProcess::set_terminal_size(unsigned short rows, unsigned short cols) {
    if (!pty_) return false;
    winsize ws{};
    ws.ws_row = rows;
    ws.ws_col = cols;
    return ::ioctl(in_fd_.get(), TIOCSWINSZ, &ws) == 0;
}

void ClientProcess::signal(int sig) {
    if (!exit_) ptyvisor::pidfd_send_signal(pidfd_.get(), sig);
}

std::string ClientProcess::transcript() const {
    return "--- client stdout (control bytes escaped) ---\n" + escaped(out_) +
           "\n--- client stderr ---\n" + escaped(err_) + "\n--- end ---";
}

}  // namespace ptyvisor::itest
