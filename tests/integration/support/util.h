// Small helpers shared by the integration suite: test environment, temp directories,
// deadlines, pidfds and /proc probes.
//
// Nothing here sleeps to synchronise: every wait is a poll() on a descriptor (a pipe, a
// socket, a pidfd) bounded by a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/unique_fd.h"

namespace ptyvisor::itest {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// --- test environment -------------------------------------------------------------------

// Path of the daemon binary: env PTYVISORD_BIN, else the path compiled in, else "".
std::string daemon_binary();
// Path of the CLI binary as the test account can run it: env PTYVISOR_BIN, else the path
// compiled in, else "". When the account cannot reach that file (a clone in /root, mode
// 0700), a copy in a 0755 directory under /tmp, removed when this process exits.
std::string cli_binary();
// Session backend under test: env PTYVISOR_TEST_BACKEND ("direct" unless set).
std::string backend();
// True when env PTYVISOR_TEST_SCALE=full: run the full-size volumes and counts.
bool full_scale();
// Picks the CI or the full-scale value.
std::size_t scaled(std::size_t ci, std::size_t full);
// For the volume tests, whose subject is loss or growth under load: an ASan+UBSan build, ten
// times slower, and a run with every daemon under valgrind (PTYVISOR_VALGRIND), slower still,
// run the same paths over a smaller volume (the default build carries the volume; the
// sanitizers and memcheck look for memory errors, which the first rounds already exercise).
std::size_t scaled(std::size_t ci, std::size_t sanitized, std::size_t full);

struct Account {
    std::string name;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string home;
};
// The account the suite's clients run as (env PTYVISOR_TEST_ACCOUNT, default "ptyvisor-test").
std::string account_name();
std::optional<Account> lookup_account(const std::string& name);
// `built`, or a copy of it that the test account can execute when it cannot reach `built`
// (a clone in /root, mode 0700). Copies go under /run and are removed at exit.
std::string reachable_by_account(const std::string& built);
std::optional<Account> lookup_uid(uid_t uid);
// Whether `account` may execute `path`: asked of the kernel, as the account, in a child.
bool account_can_execute(const Account& account, const std::string& path);

// --- files and directories --------------------------------------------------------------

// A directory made with mkdtemp under /tmp, mode 0755 so that the test account can traverse
// it; removed with everything in it on destruction unless keep() was called.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    [[nodiscard]] const std::string& path() const { return path_; }
    [[nodiscard]] std::string operator/(const std::string& name) const { return path_ + "/" + name; }
    void keep() { keep_ = true; }

private:
    std::string path_;
    bool keep_ = false;
};

std::string read_text_file(const std::string& path);
void write_text_file(const std::string& path, const std::string& text);

// --- descriptors and processes ----------------------------------------------------------

// Waits until fd reports one of `events` or the deadline passes. Returns the revents, 0 on
// timeout.
short wait_fd(int fd, short events, Clock::time_point deadline);

UniqueFd open_pidfd(pid_t pid);
// True when the process behind pidfd has exited (or is a zombie) within `timeout`.
bool wait_pidfd_exit(int pidfd, Millis timeout);

// Number of open descriptors of a process, from /proc/<pid>/fd; -1 on error.
long count_fds(pid_t pid);
// "fd -> target" lines for every open descriptor of a process (for failure messages).
std::string fd_listing(pid_t pid);
// VmRSS of a process in KiB, from /proc/<pid>/status; -1 on error.
long rss_kib(pid_t pid);

// In a forked child: drop to uid/gid with exactly `groups` as supplementary groups.
// Async-signal-safe. Returns false (errno set) on failure.
bool drop_privileges(uid_t uid, gid_t gid, std::span<const gid_t> groups);

// Shell-style status from a waitid() result: the code, or 128+signal.
int shell_status(int cld_code, int status);

// Owned NULL-terminated argv/envp built before fork() so the child only calls execve().
class CStrings {
public:
    explicit CStrings(const std::vector<std::string>& strings);
    char* const* get() { return pointers_.data(); }

private:
    std::vector<std::string> storage_;
    std::vector<char*> pointers_;
};

// The environment clients run with: PATH, HOME, a C locale and PTYVISOR_SOCKET.
std::vector<std::string> client_environment(const Account& account, const std::string& socket,
                                            const std::string& term);

// `s` with every '\r' removed.
std::string without_cr(const std::string& s);

// Extracts the first decimal number that follows `key` in text ("pid=" -> 1234).
std::optional<long> number_after(const std::string& text, const std::string& key);

}  // namespace ptyvisor::itest
