// Support for the reliability suite (tests/reliability): hostile same-uid processes
// (flooders), latency statistics, cgroup probes, and running a command locally as the test
// account for comparison with what ptyvisord reports.
//
// Everything here builds on tests/integration/support (DaemonProcess, RawClient, Connector,
// EndToEnd), which it only reads. Nothing sleeps to synchronise: waits are poll()s on pipes,
// sockets and pidfds under deadlines. The only timed pauses are an attacker's pacing
// (slowloris), which is the behaviour under test.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "support/daemon.h"
#include "support/raw_client.h"
#include "support/util.h"

namespace ptyvisor::itest::rel {

// --- statistics ---------------------------------------------------------------------------

struct Latency {
    std::size_t n = 0;
    double p50 = 0, p99 = 0, max = 0, mean = 0;  // milliseconds
    [[nodiscard]] std::string describe() const;
};
Latency summarize(std::vector<double> ms);

// A deterministic generator (xorshift64*), so that every run of a seeded scenario is the same.
class Rng {
public:
    explicit Rng(std::uint64_t seed) : s_(seed ? seed : 0x9e3779b97f4a7c15ULL) {}
    std::uint64_t next() {
        s_ ^= s_ >> 12;
        s_ ^= s_ << 25;
        s_ ^= s_ >> 27;
        return s_ * 0x2545f4914f6cdd1dULL;
    }
    // Uniform in [0, n).
    std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
    bool chance(unsigned percent) { return below(100) < percent; }

private:
    std::uint64_t s_;
};

// The seed of the run: env PTYVISOR_TEST_SEED, else `fallback`. Printed by the tests so that a
// failure can be replayed.
std::uint64_t seed(std::uint64_t fallback);

// --- the systemd run --------------------------------------------------------------------------

// True when env PTYVISOR_REQUIRE_SYSTEMD is "1": set by run-systemd.sh, the run that exists
// to test the systemd backend. There a missing systemd is a failure, not a skip, and main()
// fails the run if any test was skipped or none ran.
bool systemd_required();

// Skips the test when `present` is false, or fails it when systemd_required(): a run that
// skips what it exists to run must not pass.
#define PTYVISOR_NEEDS_SYSTEMD_HARNESS(present)                                                   \
    do {                                                                                          \
        if (!(present)) {                                                                         \
            if (::ptyvisor::itest::rel::systemd_required())                                       \
                FAIL() << "PTYVISOR_REQUIRE_SYSTEMD=1, but this is not the systemd backend "      \
                          "inside the harness (PTYVISOR_TEST_BACKEND=systemd, /run/systemd/system)"; \
            GTEST_SKIP() << "needs the systemd backend inside the harness "                       \
                            "(tests/reliability/run-systemd.sh)";                                 \
        }                                                                                         \
    } while (0)

// --- flooders -----------------------------------------------------------------------------

enum class FloodKind {
    Hold,          // connect and hold the connection, sending nothing
    Slowloris,     // a valid START, one byte per interval (the first carrying the cwd fd)
    Garbage,       // random bytes and random headers, then wait for the ERROR
    ConnectClose,  // connect and close at once, in a tight loop
    FailAuth,      // START with the cwd fd but a wrong inode (cwd_mismatch)
};
std::string to_string(FloodKind kind);

struct FloodOptions {
    FloodKind kind = FloodKind::Hold;
    std::string socket;
    std::string work_dir;      // a directory the account can open (FailAuth, Slowloris)
    unsigned processes = 4;    // separate processes, each running as the account
    unsigned connections = 64; // connections each process keeps open at once
    Millis slowloris_interval{4000};
    std::uint64_t seed = 1;
};

// What the flooders saw, summed over their processes.
struct FloodStats {
    long attempts = 0;          // connections made (connect() succeeded)
    long backlog_full = 0;      // connect() refused with EAGAIN (listen backlog full)
    long closed_silently = 0;   // connections closed by the daemon without an ERROR frame
    std::map<std::string, long> errors;  // ERROR code -> count
    [[nodiscard]] std::string describe() const;
};

// Forked processes, each dropped to the account's credentials, attacking the socket until
// stop(). They are separate processes from the test (and from any Connector), so that the
// daemon's per-process accounting sees them as what they are.
class Flood {
public:
    static std::unique_ptr<Flood> start(const FloodOptions& options, const Account& account,
                                        std::string& error);
    ~Flood();
    Flood(const Flood&) = delete;
    Flood& operator=(const Flood&) = delete;

    // Waits until every process has made its first round of connections (each reports it on
    // its pipe). False on timeout.
    bool wait_engaged(Millis timeout);
    // Tells every process to stop (closes their control pipes), collects their statistics and
    // reaps them. Processes that do not stop within `timeout` are killed.
    FloodStats stop(Millis timeout = Millis(10000));
    [[nodiscard]] std::vector<pid_t> pids() const;

private:
    Flood() = default;
    struct Child {
        pid_t pid = -1;
        UniqueFd pidfd;
        UniqueFd control;  // write end: closing it tells the child to stop
        UniqueFd report;   // read end: 'E' when engaged, then one statistics line
        std::string text;
        bool engaged = false;
    };
    std::vector<Child> children_;
};

// --- processes and cgroups ----------------------------------------------------------------

// The cgroup v2 mount point ("/sys/fs/cgroup" or "/sys/fs/cgroup/unified"), or "".
std::string cgroup2_mount();
// This process' cgroup v2 path ("/" or "/a/b"), or "".
std::string own_cgroup();
// The directory where the direct backend of a daemon forked by this process keeps its
// session cgroups: <mount><own cgroup>/ptyvisor.sessions.
std::string direct_sessions_dir();
// Sub-directories (session cgroups) of `dir`; empty if it does not exist.
std::vector<std::string> subdirectories(const std::string& dir);
// PIDs in a cgroup and all of its descendants.
std::vector<pid_t> cgroup_tree_pids(const std::string& dir);

// Runs argv as the account (uid, gid, its group only) in `cwd`, in a new session, with
// stdin/stdout/stderr on /dev/null, and returns how it ended, as waitid() reports it. This is
// the ground truth the daemon's EXIT is compared with.
std::optional<ExitInfo> run_locally_as(const Account& account, const std::string& cwd,
                                       const std::vector<std::string>& argv, Millis timeout);

// Lowers or raises a process' RLIMIT_NOFILE soft limit; returns the old soft limit or -1.
long set_nofile_soft(pid_t pid, long soft);

// sendmsg() of `bytes` with an arbitrary, caller-built control buffer. 0 or an errno.
int send_with_control(int socket, const std::vector<std::uint8_t>& bytes,
                      const std::vector<std::uint8_t>& control);
// A control buffer holding one SCM_RIGHTS message per entry of `groups`.
std::vector<std::uint8_t> rights_control(const std::vector<std::vector<int>>& groups);

}  // namespace ptyvisor::itest::rel

namespace ptyvisor::itest::rel {

// Runs argv as root (the test's own credentials) with stdout and stderr captured together;
// nullopt if it did not end within `timeout` (then it is killed).
std::optional<ExitInfo> run_captured(const std::vector<std::string>& argv, Millis timeout,
                                     std::string& output);

}  // namespace ptyvisor::itest::rel

#include <functional>

namespace ptyvisor::itest::rel {

// The allowed agent's side of the flood scenarios: `count` sessions of `true`, one after
// the other. Each request's latency runs from before connect() to STARTED; each session must
// then end with EXIT exited 0. Anything else (ERROR, EOF, timeout) is a failure, counted by
// what happened.
struct AgentResult {
    std::vector<double> ms;
    std::map<std::string, long> failures;
    std::string first_failure;
    std::vector<std::size_t> failed_at;  // request indexes (0-based) that failed
};
AgentResult run_agent(const std::function<UniqueFd()>& connect, int cwd_fd,
                      const std::vector<std::string>& env, std::size_t count);

}  // namespace ptyvisor::itest::rel

namespace ptyvisor::itest::rel {

// SHA-256 (FIPS 180-4), so that the suite needs no crypto library.
class Sha256 {
public:
    Sha256();
    void update(const std::uint8_t* data, std::size_t n);
    std::string hex_digest();  // finishes; the object is spent afterwards

private:
    void block(const std::uint8_t* p);
    std::uint32_t h_[8];
    std::uint8_t buf_[64];
    std::size_t used_ = 0;
    std::uint64_t total_ = 0;
};

}  // namespace ptyvisor::itest::rel

namespace ptyvisor::itest::rel {

// Several client processes of the account. The daemon lets one process hold at most
// max_unauthenticated_per_peer (4) connections waiting for STARTED, so a test that opens 8
// sessions at once spreads them over processes, as 8 `ptyvisor run` would be.
class PeerPool {
public:
    static std::unique_ptr<PeerPool> start(const Account& account, std::size_t n, std::string& error);
    // A connection made by peer i % n; nullptr on failure.
    std::unique_ptr<RawClient> connect(std::size_t i, const std::string& socket);

private:
    std::vector<std::unique_ptr<Connector>> peers_;
};

}  // namespace ptyvisor::itest::rel
