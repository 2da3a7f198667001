// ClientProcess: the real `ptyvisor` CLI, run as the test account, either with pipes for
// stdin/stdout/stderr or with a fresh PTY as its controlling terminal (stdin and stdout on the
// PTY, stderr on a pipe).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "support/daemon.h"
#include "support/util.h"

namespace ptyvisor::itest {

struct ClientOptions {
    enum class Stdin { Pipe, Null, Pty };
    Stdin stdin_mode = Stdin::Pipe;
    std::string cwd;                 // the client's own working directory
    std::vector<std::string> env;    // the client's whole environment
    unsigned short pty_rows = 24;    // initial size of the client's terminal (Pty mode)
    unsigned short pty_cols = 80;
};

class ClientProcess {
public:
    // Forks; the child drops to `account` (its uid, gid and no other group), sets up stdio,
    // chdirs to options.cwd and execs `binary` with `args`.
    static std::unique_ptr<ClientProcess> spawn(const std::string& binary,
                                                const std::vector<std::string>& args,
                                                const Account& account,
                                                const ClientOptions& options, std::string& error);
    ~ClientProcess();
    ClientProcess(const ClientProcess&) = delete;
    ClientProcess& operator=(const ClientProcess&) = delete;

    [[nodiscard]] pid_t pid() const { return pid_; }

    // Writes all of `bytes` to the client's stdin (pipe or PTY master), reading its output
    // meanwhile so that neither side can block the other. False on failure or timeout.
    bool write_input(const std::string& bytes, Millis timeout = Millis(10000));
    // Closes the stdin pipe (Pipe mode): the client sees end of input.
    void close_input();

    // Reads output until `done(stdout_text)` is true, both outputs end, or `timeout` passes.
    // Returns done's final answer.
    bool read_until(const std::function<bool(const std::string&)>& done, Millis timeout);
    // Waits for `needle` in stdout, both compared with every '\r' removed: a client on a
    // terminal may keep output processing (ONLCR) on, as systemd-run --pty does, which turns
    // the session's "\r\n" into "\r\r\n".
    bool wait_for_output(const std::string& needle, Millis timeout);

    // Waits up to `timeout` for the client to exit and its outputs to end; nullopt on timeout.
    std::optional<ExitInfo> wait_exit(Millis timeout);

    // TIOCSWINSZ on the client's terminal (Pty mode).
    bool set_terminal_size(unsigned short rows, unsigned short cols);
    void signal(int sig);

    [[nodiscard]] const std::string& out() const { return out_; }
    [[nodiscard]] const std::string& err() const { return err_; }
    // stdout with every '\r' removed.
    [[nodiscard]] std::string text() const { return without_cr(out_); }
    // Both streams, labelled, for failure messages.
    [[nodiscard]] std::string transcript() const;

private:
    ClientProcess() = default;
    // One poll round over the outputs and the pidfd; false when nothing more can happen
    // before the deadline.
    bool pump(Clock::time_point deadline, int extra_fd = -1, short extra_events = 0,
              short* extra_revents = nullptr);
    bool outputs_open() const { return out_fd_.valid() || err_fd_.valid(); }
    void reap();

    pid_t pid_ = -1;
    UniqueFd pidfd_;
    UniqueFd in_fd_;   // stdin pipe write end, or the PTY master (shared with out)
    UniqueFd out_fd_;  // stdout pipe read end, or a dup of the PTY master
    UniqueFd err_fd_;
    bool pty_ = false;
    std::string out_;
    std::string err_;
    std::optional<ExitInfo> exit_;
};

}  // namespace ptyvisor::itest
