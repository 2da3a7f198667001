// TerminalProgram: a program running as the session leader of a fresh terminal, as ptyvisord
// runs a session, for tests of what the daemon learns of a terminal's programs
// (input_probe_test.cpp, input_watch_test.cpp).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "server/input_probe.h"

namespace ptyvisor::server::testing {

// A program running as the session leader of a fresh terminal, as ptyvisord runs a session.
class TerminalProgram {
public:
    // `cgroup_procs`: if valid, the child moves itself into that cgroup.procs's cgroup first.
    explicit TerminalProgram(const std::vector<std::string>& argv, int cgroup_procs = -1) {
        master_.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
        if (!master_ || ::unlockpt(master_.get()) != 0) return;
        UniqueFd peer(::ioctl(master_.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY));
        if (!peer) return;
        winsize size{};
        size.ws_row = 24;
        size.ws_col = 80;
        ::ioctl(master_.get(), TIOCSWINSZ, &size);
        terminal_ = identify_terminal(master_.get());
        std::vector<char*> args;
        for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
        args.push_back(nullptr);
        std::vector<std::string> environment{"TERM=xterm", "HOME=/", "LANG=C.UTF-8"};
        if (const char* path = ::getenv("PATH")) environment.push_back(std::string("PATH=") + path);
        std::vector<char*> envp;
        for (std::string& entry : environment) envp.push_back(entry.data());
        envp.push_back(nullptr);
        pid_ = ::fork();
        if (pid_ == 0) {
            // The child: only async-signal-safe calls until exec.
            if (cgroup_procs >= 0 && ::write(cgroup_procs, "0", 1) != 1) ::_exit(126);
            ::setsid();
            ::ioctl(peer.get(), TIOCSCTTY, 0);
            ::dup2(peer.get(), 0);
            ::dup2(peer.get(), 1);
            ::dup2(peer.get(), 2);
            if (peer.get() > 2) ::close(peer.get());
            ::execvpe(args[0], args.data(), envp.data());
            ::_exit(127);
        }
    }

    TerminalProgram(const TerminalProgram&) = delete;
    TerminalProgram& operator=(const TerminalProgram&) = delete;

    ~TerminalProgram() {
        if (pid_ <= 0) return;
        if (const std::optional<pid_t> group = foreground_group(master_.get())) ::kill(-*group, SIGKILL);
        ::kill(-pid_, SIGKILL);
        ::kill(pid_, SIGKILL);
        if (!reaped_) ::waitpid(pid_, nullptr, 0);
    }

    [[nodiscard]] bool started() const { return pid_ > 0 && terminal_.known; }
    [[nodiscard]] pid_t pid() const { return pid_; }
    [[nodiscard]] int master() const { return master_.get(); }
    [[nodiscard]] InputWait probe(int session_cgroup = -1) const {
        return probe_input_wait(master_.get(), terminal_, session_cgroup);
    }
    [[nodiscard]] const std::string& output() const { return output_; }

    // Waits up to `timeout` for output (the event a prompt or "ready" is), keeping what came.
    void read_output(std::chrono::milliseconds timeout) {
        pollfd entry{master_.get(), POLLIN, 0};
        if (::poll(&entry, 1, static_cast<int>(timeout.count())) <= 0) return;
        char buffer[4096];
        for (;;) {
            const ssize_t n = ::read(master_.get(), buffer, sizeof buffer);
            if (n <= 0) return;
            output_.append(buffer, static_cast<std::size_t>(n));
        }
    }

    [[nodiscard]] bool await_output(const std::string& text, std::chrono::seconds limit = std::chrono::seconds(10)) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (output_.find(text) == std::string::npos) {
            if (std::chrono::steady_clock::now() >= deadline) return false;
            read_output(std::chrono::milliseconds(50));
        }
        return true;
    }

    void reap() {
        ::waitpid(pid_, nullptr, 0);
        reaped_ = true;
    }

private:
    UniqueFd master_;
    TerminalIdentity terminal_;
    pid_t pid_ = -1;
    bool reaped_ = false;
    std::string output_;
};

}  // namespace ptyvisor::server::testing
