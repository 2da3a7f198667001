// Backend: how a session's command is started, watched and stopped.
//
// Two implementations sit behind this interface: `systemd` (a transient unit per session,
// through sd-bus) and `direct` (fork and exec in a cgroup of our own). Both run on the
// daemon's one sd-event loop: nothing here blocks after start-up, and every callback is
// invoked from that loop, never from inside the call that registered it.
//
// Invariants:
//  - The server owns the PTY master; a backend only ever sees the PTY peer (the slave).
//  - Every process a backend starts for a session is inside that session's unit or cgroup,
//    and stop() ends all of them. A backend never signals a process it did not start.
//  - A session runs with no_new_privs and an empty capability bounding set: nothing in it
//    can become more powerful than the agent (setuid and file capabilities do nothing).
//  - on_started, on_start_failed and on_exited are each called at most once, and
//    on_exited never before on_started.
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"
#include "backends/sandbox_profile.h"
#include "common/process.h"
#include "protocol/payloads.h"

namespace ptyvisor::backends {

using Clock = std::chrono::steady_clock;

// The agent's account, resolved once at start-up.
struct Account {
    std::string name;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;  // supplementary groups, from getgrouplist
    std::string home;
    std::string shell;
};

struct SessionSpec {
    std::string unit_name;          // "<prefix>-<32 hex digits>.service"
    std::vector<std::string> argv;  // argv[0] is looked up in PATH from `env`
    std::vector<std::string> env;   // the complete environment, TERM and USER included
    // The working directory, whose st_dev/st_ino the server verified. Borrowed: valid during
    // resolve() and start() only. The server closes it, off the loop (a descriptor from
    // the client may block in close()).
    int cwd = -1;
    std::uint64_t cwd_dev = 0;
    std::uint64_t cwd_ino = 0;
    UniqueFd tty;                   // the PTY peer; becomes stdin, stdout, stderr, ctty
    std::string tty_path;           // "/dev/pts/N"
    Account account;
    // Unit properties from configuration, e.g. {"MemoryMax", "512M"}, {"TasksMax", "256"}.
    std::map<std::string, std::string> properties;
    // The resource limits of the agent process that asked (read at START): the session starts
    // with them, never with the daemon's (root's NPROC, its raised NOFILE). Where a configured
    // property sets one (LimitNOFILE=, ...), that one wins. nullopt: the backend's defaults.
    std::optional<ResourceLimits> limits;
    // The profile the session runs under (sandbox_profile.h); nullopt: none. check_profile()
    // accepted it before start() is called.
    std::optional<SandboxProfile> profile;
    // Filled by the backend's Resolver, where it has one.
    std::string cwd_path;   // the working directory's path
    std::string exec_path;  // argv[0], looked up as the agent would look it up
};

// Resolves what a backend's start() needs from the file system, as the agent would see it.
// It runs on a worker thread whose file-system identity is the agent's, never on the loop:
// a path the agent names may sit on a FUSE mount that it serves and never answers. A
// Resolver touches nothing but `spec`, does not throw, and returns false with `why` (safe
// to show the client) when the session cannot start.
using Resolver = bool (*)(SessionSpec& spec, std::string& why);

struct SessionEvents {
    // The command has exec'd; input written to the PTY from now on is not flushed.
    std::function<void(pid_t main_pid)> on_started;
    // The command could not be started. `why` is safe to show to the client.
    std::function<void(std::string why)> on_start_failed;
    // The main process has ended. `status` has kind, code or signal and core flag, and the
    // unit result where the backend has one; its `reason` is Exited or Timeout.
    std::function<void(protocol::ExitStatus status)> on_exited;
};

// The processes of one session, in its unit or cgroup: what a backend started and will stop.
// (The daemon's server::Session owns one, with the terminal and the log around it.)
//
// Only stop() ends a session's processes. Destroying a SessionProcesses without stop() leaves them
// running, in both backends, together with what the next run's cleanup_orphans() needs to
// find them (the direct backend's record and cgroup; the systemd backend's unit): a
// destructor never kills, never waits, and calls none of the SessionEvents. The server stops
// every session before letting go of it, except one whose stop() failed (quarantined: its
// processes outlived the deadline); a daemon that keeps sessions across a restart relies on
// this too.
class SessionProcesses {
public:
    virtual ~SessionProcesses() = default;
    [[nodiscard]] virtual const std::string& unit() const = 0;
    [[nodiscard]] virtual pid_t main_pid() const = 0;
    // A client's SIGNAL: sends `sig` to every process of the session that the agent itself
    // could signal (real and saved uid the agent's; backends/session_signals.h). Returns 0
    // when one was signalled, else -ESRCH (none left) or -EPERM (none the agent's).
    virtual int signal_all(int sig) = 0;
    // A client's SIGNAL to the terminal's foreground process group `pgid`: the same rule, and
    // only processes of this session are signalled. Returns 0, or -ESRCH when no process of
    // the session is in that group, or -EPERM when none of them is the agent's.
    virtual int signal_foreground_group(pid_t pgid, int sig) = 0;
    // Ends every process of the session and waits until none is left or `deadline` passes.
    // `done(ok, why)` is called exactly once, from the event loop.
    virtual void stop(Clock::time_point deadline,
                      std::function<void(bool ok, std::string why)> done) = 0;
    // What the session has cost so far, read from its cgroup (cheap: cgroup files, never a bus
    // round trip); nullopt when the backend cannot tell. Valid after on_exited too, until stop().
    [[nodiscard]] virtual std::optional<SessionUsage> usage() const { return std::nullopt; }
};

// What the kernel told us about a connecting peer.
struct Peer {
    pid_t pid = 0;    // in our PID namespace
    uid_t uid = 0;
    gid_t gid = 0;
    int pidfd = -1;   // SO_PEERPIDFD (owned by the caller), or a pidfd_open fallback
};

// How sure a backend is that a peer may have a session.
enum class PeerVerdict {
    Allowed,
    Refused,  // `why` says why
    // The peer sits in an allowed unit whose MainPID the backend has not learnt yet (the
    // unit has just (re)started): recheck() and ask again. `why` says what is in doubt.
    Unsure,
};

// recheck()'s callback. The caller owns the function; once it lets go, the call is dropped
// unseen, so a connection that closes while it waits needs no unregistering.
using RecheckCallback = std::weak_ptr<std::function<void()>>;

class Backend {
public:
    virtual ~Backend() = default;
    [[nodiscard]] virtual std::string_view name() const = 0;

    // Stops every session left behind by an earlier run of the daemon (a crash, SIGKILL, or
    // a SessionProcesses destroyed without stop(), as one quarantined).
    // Runs once at start-up, before the socket listens; it may block until `deadline`.
    // Returns false with `why` when the backend cannot clean up at all (no bus). What it
    // asked to end and that did not end by `deadline` is logged and left for the next start
    // (quarantined): a process the kernel cannot kill yet must not keep the daemon from
    // serving.
    virtual bool cleanup_orphans(Clock::time_point deadline, std::string& why) = 0;

    // What must run before start(), off the loop; nullptr when nothing does.
    [[nodiscard]] virtual Resolver resolver() const { return nullptr; }

    // Takes back a session an earlier run of this daemon started and handed over
    // (server/session_handover.h): watches `spec.main_pid` again and reports its end through
    // events.on_exited (on_started is not called again). Must be called before
    // cleanup_orphans(), which then leaves the adopted units alone. Returns nullptr with
    // `why` when the unit is not one this backend can recognise as that session's.
    struct Adoption {
        std::string unit;
        pid_t main_pid = 0;
        uid_t agent = 0;
        std::string command;  // argv[0], for messages
    };
    [[nodiscard]] virtual bool can_adopt() const { return false; }
    virtual std::unique_ptr<SessionProcesses> adopt(const Adoption& spec, SessionEvents events, std::string& why) {
        (void)spec;
        (void)events;
        why = "the " + std::string(name()) + " backend cannot take sessions back";
        return nullptr;
    }

    // Starts spec.argv on spec.tty, once resolver() has filled `spec`. Returns nullptr with `why` when it fails at once;
    // otherwise exactly one of events.on_started / on_start_failed follows.
    virtual std::unique_ptr<SessionProcesses> start(SessionSpec spec, SessionEvents events,
                                           std::string& why) = 0;

    // Whether this backend can enforce every setting of `profile` on this host. False with
    // `why` (safe to show the client): the START is refused rather than run unconfined.
    virtual bool check_profile(const SandboxProfile& profile, std::string& why) const {
        if (!profile.needs_backend()) return true;
        why = "the " + std::string(name()) + " backend cannot enforce profile \"" + profile.name + "\"";
        return false;
    }

    // Whether `peer` may have a session: it must not run inside a session this backend
    // started, and when allowed units are configured it must be the MainPID of one of them.
    // Called at accept time and again right before start; cheap (never a bus round trip).
    virtual PeerVerdict check_peer(const Peer& peer, std::string& why) = 0;

    // Whether check_peer() would certainly refuse a peer of the agent's account whose
    // SO_PEERCRED PID is `pid`, known without pinning it or reading its cgroup: under a
    // connection flood the refusals are what the agent's connection waits behind in the
    // listen queue. False means "ask check_peer()". With allowed units, a backend that
    // caches each unit's live MainPID can answer from the PID alone.
    virtual bool refuses_pid(pid_t pid, std::string& why) const {
        (void)pid;
        (void)why;
        return false;
    }

    // Refreshes what check_peer() relies on, without blocking, and calls `done` from the
    // event loop once every answer it asked for is in (or could not be had). Requests that
    // arrive while one refresh is in flight share the next one, so a flood of doubtful
    // peers costs one round trip at a time.
    virtual void recheck(RecheckCallback done) = 0;
};

struct BackendOptions {
    sd_event* event = nullptr;
    std::string unit_prefix = "ptyvisor";
    std::vector<std::string> allowed_units;  // e.g. "opencode.service"
    std::string state_directory = "/run/ptyvisor";  // direct backend's session records
};

}  // namespace ptyvisor::backends
