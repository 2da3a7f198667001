#include "backends/direct/direct_backend.h"

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <dirent.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include "backends/direct/cgroup_limits.h"
#include "backends/direct/sandbox_setup.h"
#include "backends/direct/session_cgroup.h"
#include "backends/direct/session_records.h"
#include "backends/direct/spawn.h"
#include "backends/exit_status.h"
#include "backends/session_signals.h"
#include "common/event.h"
#include "common/linux.h"
#include "common/log.h"
#include "common/private_directory.h"
#include "common/process.h"

namespace ptyvisor::backends {
namespace {

using direct::CgroupRoot;
using direct::SessionRecord;
using direct::SessionRecords;

class DirectBackend;

class DirectSession final : public SessionProcesses {
public:
    DirectSession(DirectBackend& backend, sd_event* event, std::string unit, std::string cgroup,
                  std::string cgroup_path, uid_t agent, direct::Spawned spawned,
                  SessionEvents events, std::string command, direct::SessionCgroups dirs = {})
        : dirs_(std::move(dirs)),
          backend_(backend),
          event_(event),
          unit_(std::move(unit)),
          cgroup_(std::move(cgroup)),
          cgroup_path_(std::move(cgroup_path)),
          agent_(agent),
          pid_(spawned.pid),
          pidfd_(std::move(spawned.pidfd)),
          exec_status_(std::move(spawned.exec_status)),
          child_memory_(std::move(spawned.memory)),
          events_(std::move(events)),
          command_(std::move(command)) {}

    ~DirectSession() override;

    int watch() {
        if (!exec_status_) {
            exec_done_ = true;  // adopted: it exec'd under the run that started it
            return add_io(event_, exit_source_, pidfd_.get(), EPOLLIN, [this](std::uint32_t) { on_exit(); });
        }
        int r = add_io(event_, exec_source_, exec_status_.get(), EPOLLIN,
                       [this](std::uint32_t) { on_exec_status(); });
        if (r < 0) return r;
        return add_io(event_, exit_source_, pidfd_.get(), EPOLLIN, [this](std::uint32_t) { on_exit(); });
    }

    const std::string& unit() const override { return unit_; }
    pid_t main_pid() const override { return pid_; }
    pid_t session_id() const { return pid_; }  // the leader called setsid()
    const std::string& cgroup() const { return cgroup_; }

    int signal_all(int sig) override { return signal_members(members(), sig); }

    int signal_foreground_group(pid_t pgid, int sig) override {
        return signal_member_group(members(), pgid, sig);
    }

    // Ends every process of the session, whoever it runs as: cleanup, not a client's SIGNAL.
    void kill_all() {
        if (!cgroup_.empty()) {
            if (direct::kill_cgroup(cgroup_) == 0) return;
            for (const pid_t pid : direct::cgroup_pids(cgroup_)) {
                // Re-check membership through a pin: the PID may have been recycled.
                const auto process = PidRef::pin(pid);
                if (process && process->cgroup() == cgroup_path_) process->signal(SIGKILL);
            }
            return;
        }
        // No cgroup: the process group. Its ID stays ours while the leader is unreaped.
        if (!reaped_) ::kill(-pid_, SIGKILL);
    }

    void stop(Clock::time_point deadline, std::function<void(bool, std::string)> done) override;

    // From the cgroup files while they exist; after stop() has removed them, the figures it
    // read just before (the server reads the final ones when stop() answers).
    std::optional<SessionUsage> usage() const override {
        if (final_usage_) return final_usage_;
        if (dirs_.v2.empty() && dirs_.v1.empty()) return std::nullopt;
        return direct::read_usage(dirs_);
    }

    // For a session that never ran for anyone (start() failed after the spawn): kills and
    // reaps it synchronously, and forgets its record once nothing of it can be left.
    void discard();

private:
    void on_exec_status() {
        unsigned char buf[64];
        const ssize_t n = ::read(exec_status_.get(), buf, sizeof buf);
        if (n < 0 && errno == EAGAIN) return;
        // EOF: exec closed the pipe after the child left our address space (spawn.h).
        if (n == 0) child_memory_.child_done();
        exec_source_.reset();
        exec_status_.reset();
        exec_done_ = true;
        if (n > 0) {
            start_failed_ = true;
            if (events_.on_start_failed)
                events_.on_start_failed(direct::describe_exec_failure(buf, static_cast<std::size_t>(n), command_));
        } else if (events_.on_started) {
            events_.on_started(pid_);
        }
        if (exit_pending_) deliver_exit();
    }

    void on_exit() {
        siginfo_t info{};
        // Reap now: in the cgroup case the process group is not what stops the session.
        // Without a cgroup, kill the group first, while the leader's PID still pins it.
        if (cgroup_.empty()) ::kill(-pid_, SIGHUP);
        if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info,
                     WEXITED | WNOHANG) < 0 || info.si_pid == 0)
            return;
        reaped_ = true;
        child_memory_.child_done();
        exit_source_.reset();
        status_ = exit_status_from(ChildCode{info.si_code, info.si_status});
        exit_pending_ = true;
        // The exec status pipe is closed by now; read it first so on_started comes before.
        if (!exec_done_) on_exec_status();
        else deliver_exit();
        check_stopped();
    }

    void deliver_exit() {
        exit_pending_ = false;
        if (start_failed_ || !events_.on_exited) return;
        auto cb = std::move(events_.on_exited);
        cb(status_);
    }

    void check_stopped();
    void finish_stop();

    // Who a client's SIGNAL may reach: the cgroup, or without one the process session,
    // whose ID (the leader's PID) stays ours while the leader is unreaped.
    SessionMembers members() const {
        SessionMembers m;
        m.agent = agent_;
        if (!cgroup_.empty()) {
            m.cgroup_dir = cgroup_;
            m.cgroup = cgroup_path_;
        } else if (!reaped_) {
            m.session_id = pid_;
        }
        return m;
    }

    direct::SessionCgroups dirs_;
    std::optional<SessionUsage> final_usage_;
    DirectBackend& backend_;
    sd_event* event_;
    std::string unit_;
    std::string cgroup_;       // absolute directory, or empty without cgroups
    std::string cgroup_path_;  // the same as /proc/PID/cgroup shows it
    uid_t agent_;
    pid_t pid_;
    UniqueFd pidfd_;
    UniqueFd exec_status_;
    direct::ChildMemory child_memory_;  // until exec or reaping; leaked if destroyed before
    SessionEvents events_;
    std::string command_;
    EventSource exec_source_, exit_source_, cgroup_watch_, stop_timer_, stop_check_;
    bool exec_done_ = false, start_failed_ = false, reaped_ = false, exit_pending_ = false;
    protocol::ExitStatus status_;
    std::function<void(bool, std::string)> stop_done_;
};

class DirectBackend final : public Backend {
public:
    DirectBackend(const BackendOptions& o, std::optional<CgroupRoot> root, const std::string& instance)
        : options_(o),
          root_(std::move(root)),
          records_(o.state_directory, {o.unit_prefix, root_ ? root_->path() : std::string()}),
          controllers_(direct::CgroupControllers::discover(root_ ? root_->path() : std::string(), instance)),
          support_(direct::SandboxSupport::probe()) {}

    bool check_profile(const SandboxProfile& profile, std::string& why) const override {
        // Limits on a host without cgroup v2 could be set in v1, but nothing would end the
        // session's processes together (no cgroup.kill): a fork bomb would outlive stop().
        if (!root_ && (profile.memory_max || profile.tasks_max || profile.cpu_quota_percent)) {
            why = "the direct backend limits sessions only with a writable cgroup v2 (cgroup.kill) for membership";
            return false;
        }
        return controllers_.check(profile, why) && support_.check(profile, why);
    }

    int prepare(std::string& why) {
        if (const int r = records_.prepare(); r < 0) {
            why = "cannot create " + options_.state_directory + "/sessions: " + private_directory_error(r);
            return r;
        }
        if (!root_) {
            log_warning("no writable cgroup v2: direct sessions are tracked by process group");
            return 0;
        }
        // sd-event closes its inotify instance with the last watch, and closing one costs
        // the kernel milliseconds (an RCU grace period) during which the whole loop stalls.
        // A watch for the backend's lifetime keeps the instance, so sessions never pay it.
        sd_event_source* s = nullptr;
        if (sd_event_add_inotify(options_.event, &s, root_->path().c_str(), IN_DELETE_SELF,
                                 [](sd_event_source*, const inotify_event*, void*) { return 0; },
                                 nullptr) >= 0) {
            (void)sd_event_source_set_description(s, "inotify keeper");
            keep_inotify_.reset(s);
        }
        return 0;
    }

    std::string_view name() const override { return "direct"; }

    bool cleanup_orphans(Clock::time_point deadline, std::string& why) override;

    std::unique_ptr<SessionProcesses> start(SessionSpec spec, SessionEvents events, std::string& why) override {
        std::string cgroup;
        UniqueFd procs;
        if (spec.profile && !check_profile(*spec.profile, why)) return nullptr;
        if (root_) {
            if (const int r = direct::create_session_cgroup(*root_, spec.unit_name, cgroup); r < 0) {
                why = "cannot create the session cgroup: " + std::string(std::strerror(-r));
                return nullptr;
            }
            procs.reset(::open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            if (!procs) {
                why = "cannot open the session cgroup: " + std::string(std::strerror(errno));
                direct::remove_cgroup(cgroup);
                return nullptr;
            }
        }
        // The accounting directories (every session) and the profile's limits, before the
        // first process exists: nothing of the session ever runs unlimited.
        direct::SessionCgroups dirs;
        dirs.v2 = cgroup;
        if (controllers_.create(spec.unit_name, spec.profile ? &*spec.profile : nullptr, dirs, why) < 0) {
            if (!cgroup.empty()) direct::remove_cgroup(cgroup);
            return nullptr;
        }
        std::vector<UniqueFd> v1_fds;
        std::vector<int> v1;
        for (const auto& dir : dirs.v1) {
            v1_fds.emplace_back(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            if (!v1_fds.back()) {
                why = "cannot open " + dir + ": " + std::strerror(errno);
                direct::remove_v1(dirs);
                if (!cgroup.empty()) direct::remove_cgroup(cgroup);
                return nullptr;
            }
            v1.push_back(v1_fds.back().get());
        }
        auto spawned = direct::spawn_session(spec, procs.get(), v1, support_.landlock_abi, why);
        spec.tty.reset();  // only the session may hold the peer, or the master never sees EOF
        if (spawned.pid < 0) {
            direct::remove_v1(dirs);
            if (!cgroup.empty()) direct::remove_cgroup(cgroup);
            return nullptr;
        }
        SessionRecord record{spec.unit_name, cgroup, spawned.pid,
                             direct::process_start_time(spawned.pid).value_or(0)};
        if (const int r = records_.write(record); r < 0)
            log_warning("cannot record session", {{"UNIT", spec.unit_name}, {"ERROR", std::strerror(-r)}});
        const std::string cgroup_path = root_ ? root_->relative() + "/" + spec.unit_name : std::string();
        auto session = std::make_unique<DirectSession>(*this, options_.event, spec.unit_name, cgroup,
                                                       cgroup_path, spec.account.uid, std::move(spawned),
                                                       std::move(events), spec.argv.front(), std::move(dirs));
        if (const int r = session->watch(); r < 0) {
            why = std::string("cannot watch the session: ") + std::strerror(-r);
            session->discard();
            return nullptr;
        }
        live_.insert(session.get());
        return session;
    }

    bool can_adopt() const override { return true; }
    std::unique_ptr<SessionProcesses> adopt(const Adoption& spec, SessionEvents events, std::string& why) override;

    PeerVerdict check_peer(const Peer& peer, std::string& why) override {
        const auto cgroup = process_cgroup(peer.pidfd);
        if (root_) {
            if (!cgroup) {
                why = "cannot read the peer's cgroup";
                return PeerVerdict::Refused;
            }
            if (cgroup->rfind(root_->all_sessions() + "/", 0) == 0) {
                why = "the peer runs inside a ptyvisor session";
                return PeerVerdict::Refused;
            }
        } else {
            // Without cgroups a session is its process session; weaker, since setsid()
            // escapes it, but it still refuses the plain case of a command asking again.
            const auto sid = process_session(peer.pidfd);
            for (const auto* s : live_)
                if (sid && *sid == s->session_id()) {
                    why = "the peer runs inside a ptyvisor session";
                    return PeerVerdict::Refused;
                }
        }
        if (!options_.allowed_units.empty()) {
            // No service manager to ask for MainPID: the unit's cgroup, its full path, is the
            // best we have (session_cgroup.h).
            if (cgroup && direct::in_allowed_unit(*cgroup, options_.allowed_units)) return PeerVerdict::Allowed;
            why = "the peer is not in an allowed unit (" + cgroup.value_or("unknown cgroup") + ")";
            return PeerVerdict::Refused;
        }
        return PeerVerdict::Allowed;
    }

    // The session object is going; its processes and record may stay (backend.h).
    void forget(DirectSession* s) { live_.erase(s); }
    // Every process of the session has ended: its record goes.
    void ended(DirectSession* s) {
        records_.remove(s->unit());
        adopted_.erase(s->unit());
    }

    // Never Unsure (no MainPID cache here), so there is nothing to refresh; the answer still
    // comes from the loop, as the interface promises.
    void recheck(RecheckCallback done) override {
        rechecks_.push_back(std::move(done));
        add_defer(options_.event, recheck_source_, [this] {
            auto all = std::move(rechecks_);
            rechecks_.clear();
            for (auto& waiter : all)
                if (const auto call = waiter.lock()) (*call)();
        });
    }

private:
    BackendOptions options_;
    std::optional<CgroupRoot> root_;
    SessionRecords records_;
    std::set<DirectSession*> live_;
    std::set<std::string> adopted_;  // units cleanup_orphans() leaves alone
    direct::CgroupControllers controllers_;
    direct::SandboxSupport support_;

public:
    const direct::CgroupControllers& controllers() const { return controllers_; }

public:
    // After a re-exec the earlier run's children are ours: those not taken back that have
    // ended (cleanup_orphans() killed them) are reaped here, so that none stays a zombie.
    void reap_stray_children() {
        std::set<pid_t> watched;
        for (const auto* s : live_) watched.insert(s->main_pid());
        const auto children = read_small_file("/proc/self/task/" + std::to_string(::getpid()) + "/children");
        if (!children) return;
        std::size_t at = 0;
        while (at < children->size()) {
            const auto end = children->find(' ', at);
            const std::string word = children->substr(at, end == std::string::npos ? std::string::npos : end - at);
            at = end == std::string::npos ? children->size() : end + 1;
            const long pid = std::strtol(word.c_str(), nullptr, 10);
            if (pid > 1 && !watched.contains(static_cast<pid_t>(pid)))
                ::waitpid(static_cast<pid_t>(pid), nullptr, WNOHANG);
        }
    }
    EventSource keep_inotify_;
    EventSource recheck_source_;
    std::vector<RecheckCallback> rechecks_;
};

// Leaves the processes running and the record in place (backend.h): the next run's
// cleanup_orphans() finds them there. What goes is only what watched them.
DirectSession::~DirectSession() { backend_.forget(this); }

void DirectSession::discard() {
    kill_all();
    siginfo_t info{};
    if (!reaped_ &&
        ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info, WEXITED) == 0)
        reaped_ = true;
    if (reaped_) child_memory_.child_done();
    direct::remove_v1(dirs_);
    // Without a cgroup the leader was the whole record; with one, the record stays until the
    // directory is gone, so that a process still dying in it is cleaned up by the next run.
    if (cgroup_.empty() || direct::remove_cgroup(cgroup_) == 0) backend_.ended(this);
}

void DirectSession::stop(Clock::time_point deadline, std::function<void(bool, std::string)> done) {
    stop_done_ = std::move(done);
    if (!cgroup_.empty()) {
        if (const int r = direct::kill_cgroup(cgroup_); r < 0) {
            std::string why = "cannot kill cgroup " + cgroup_ + ": " + std::strerror(-r);
            add_defer(event_, stop_check_, [this, why] {
                auto cb = std::move(stop_done_);
                cb(false, why);
            });
            return;
        }
        // Usually the cgroup is empty by now (the command was alone and is reaped); only
        // otherwise is it worth watching cgroup.events, which changes when the last one leaves.
        if (reaped_ && direct::cgroup_empty(cgroup_)) {
            add_defer(event_, stop_check_, [this] { check_stopped(); });  // never call back inline
            return;
        }
        sd_event_source* s = nullptr;
        const int r = sd_event_add_inotify(
            event_, &s, (cgroup_ + "/cgroup.events").c_str(), IN_MODIFY,
            [](sd_event_source*, const inotify_event*, void* self) {
                static_cast<DirectSession*>(self)->check_stopped();
                return 0;
            },
            this);
        if (r >= 0) {
            (void)sd_event_source_set_description(s, "cgroup.events");
            cgroup_watch_.reset(s);
        }
    } else if (!reaped_) {
        ::kill(-pid_, SIGKILL);
    }
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    add_timer(event_, stop_timer_, static_cast<std::uint64_t>(std::max<std::int64_t>(left.count(), 0)),
              [this] {
                  if (!stop_done_) return;
                  auto cb = std::move(stop_done_);
                  cb(false, "session " + unit_ + " did not stop before the cleanup deadline");
              });
    add_defer(event_, stop_check_, [this] { check_stopped(); });  // never call back inline
}

void DirectSession::check_stopped() {
    if (!stop_done_ || !reaped_) return;
    if (!cgroup_.empty() && !direct::cgroup_empty(cgroup_)) return;
    finish_stop();
}

void DirectSession::finish_stop() {
    // The last figures, read while the files still exist.
    if (!dirs_.v2.empty() || !dirs_.v1.empty()) final_usage_ = direct::read_usage(dirs_);
    direct::remove_v1(dirs_);
    if (!cgroup_.empty()) direct::remove_cgroup(cgroup_);
    // Nothing of the session is left: there is nothing for the next run to clean up.
    backend_.ended(this);
    cgroup_watch_.reset();
    stop_timer_.reset();
    auto cb = std::move(stop_done_);
    cb(true, {});
}

// Waits, blocking (start-up only), until `path`'s cgroup is empty or the deadline passes.
bool wait_cgroup_empty(const std::string& path, Clock::time_point deadline) {
    UniqueFd in(::inotify_init1(IN_CLOEXEC));
    if (in && ::inotify_add_watch(in.get(), (path + "/cgroup.events").c_str(), IN_MODIFY) < 0)
        in.reset();
    while (!direct::cgroup_empty(path)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        if (!in) return false;
        pollfd p{in.get(), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000))) > 0) {
            char buf[4096];
            [[maybe_unused]] const auto n = ::read(in.get(), buf, sizeof buf);
        }
    }
    return true;
}

// Only a session this daemon's earlier run started, recorded and still parents: the record
// names the same leader with the same start time, and the leader is our child (we re-exec'd
// into this process; after a crash there is no such child and nothing is adopted).
std::unique_ptr<SessionProcesses> DirectBackend::adopt(const Adoption& spec, SessionEvents events, std::string& why) {
    std::optional<SessionRecord> record;
    for (auto& r : records_.list())
        if (r.unit == spec.unit) record = std::move(r);
    if (!record) {
        why = "no record of unit " + spec.unit;
        return nullptr;
    }
    if (record->leader != spec.main_pid) {
        why = "the record names another main process";
        return nullptr;
    }
    if (!record->cgroup.empty() && (!root_ || record->cgroup != root_->path() + "/" + spec.unit)) {
        why = "the record names another cgroup";
        return nullptr;
    }
    direct::Spawned pinned;
    pinned.pid = spec.main_pid;
    pinned.pidfd.reset(pidfd_open(spec.main_pid));
    if (!pinned.pidfd || direct::process_start_time(spec.main_pid) != record->start_time) {
        why = "the main process is gone or is another one";
        return nullptr;
    }
    siginfo_t info{};
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pinned.pidfd.get()), &info,
                 WEXITED | WNOHANG | WNOWAIT) < 0) {
        why = std::string("the main process is not ours to wait for: ") + std::strerror(errno);
        return nullptr;
    }
    const std::string cgroup_path = record->cgroup.empty() ? std::string() : root_->relative() + "/" + spec.unit;
    auto session = std::make_unique<DirectSession>(*this, options_.event, spec.unit, record->cgroup, cgroup_path,
                                                   spec.agent, std::move(pinned), std::move(events), spec.command,
                                                   controllers_.existing(spec.unit, record->cgroup));
    if (const int r = session->watch(); r < 0) {
        why = std::string("cannot watch the session: ") + std::strerror(-r);
        return nullptr;  // left running, recorded: cleanup_orphans() ends it
    }
    live_.insert(session.get());
    adopted_.insert(spec.unit);
    return session;
}

bool DirectBackend::cleanup_orphans(Clock::time_point deadline, std::string& /*why*/) {
    std::set<std::string> cgroups;
    // list() hands out only records this daemon could have written; it removes the rest.
    for (const auto& r : records_.list()) {
        if (adopted_.contains(r.unit)) continue;
        if (!r.cgroup.empty()) {
            cgroups.insert(r.cgroup);
        } else if (r.leader > 0) {
            // Only a process that is still the one we recorded: same PID, same start time.
            UniqueFd fd(pidfd_open(r.leader));
            if (fd && direct::process_start_time(r.leader) == r.start_time && pidfd_alive(fd.get())) {
                ::kill(-r.leader, SIGKILL);
                pidfd_send_signal(fd.get(), SIGKILL);
            }
        }
        records_.remove(r.unit);
        log_info("cleaned up orphan session", {{"UNIT", r.unit}});
    }
    // A crash between mkdir and the record leaves a cgroup with no record: clean those too.
    if (root_)
        for (const auto& c : root_->children())
            if (!adopted_.contains(c.substr(c.rfind('/') + 1))) cgroups.insert(c);
    // What does not end is quarantined, not fatal: a process the kernel cannot kill yet
    // (blocked in a FUSE request that is never answered) kept the daemon from starting, for
    // good. Its cgroup stays, and the next start tries again; the killed processes end once
    // their request is answered.
    for (const auto& c : cgroups) {
        if (const int r = direct::kill_cgroup(c); r < 0) {
            log_error("cannot kill an orphan cgroup; quarantined, serving on", {{"CGROUP", c}, {"ERROR", std::strerror(-r)}});
            continue;
        }
        if (!wait_cgroup_empty(c, deadline)) {
            log_error("an orphan cgroup did not empty in time; quarantined, serving on", {{"CGROUP", c}});
            continue;
        }
        direct::remove_cgroup(c);
    }
    // The v1 directories of those sessions: their processes ended with the v2 cgroup
    // above; what is still listed in one (a session of a host without v2) is killed first.
    for (const auto& instance : controllers_.v1_instances()) {
        DIR* d = ::opendir(instance.c_str());
        if (!d) continue;
        std::vector<std::string> dirs;
        while (const dirent* e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (e->d_type == DT_DIR && name != "." && name != ".." && !adopted_.contains(name))
                dirs.push_back(instance + "/" + name);
        }
        ::closedir(d);
        for (const auto& dir : dirs) {
            for (const pid_t pid : direct::cgroup_pids(dir)) {
                // Pinned, then still listed: a PID that was reused meanwhile is not signalled.
                UniqueFd pin(pidfd_open(pid));
                if (!pin) continue;
                const auto now = direct::cgroup_pids(dir);
                if (std::find(now.begin(), now.end(), pid) != now.end()) pidfd_send_signal(pin.get(), SIGKILL);
            }
            while (::rmdir(dir.c_str()) < 0 && errno == EBUSY && Clock::now() < deadline) {
                pollfd none{-1, 0, 0};
                ::poll(&none, 0, 10);  // start-up only: a killed process leaves within ms
            }
            if (::access(dir.c_str(), F_OK) == 0)
                log_error("an orphan cgroup v1 directory did not empty in time", {{"CGROUP", dir}});
        }
    }
    reap_stray_children();
    return true;
}

// The cgroup directory of one daemon instance: a digest of its state directory (FNV-1a),
// stable across restarts so that the next start finds what a crash left.
std::string instance_name(const std::string& state_directory) {
    std::uint64_t h = 14695981039346656037ull;
    for (const unsigned char c : state_directory) h = (h ^ c) * 1099511628211ull;
    char name[32];
    std::snprintf(name, sizeof name, "instance-%016llx", static_cast<unsigned long long>(h));
    return name;
}

}  // namespace

std::unique_ptr<Backend> make_direct_backend(const BackendOptions& options, std::string& why) {
    const auto instance = instance_name(options.state_directory);
    auto backend = std::make_unique<DirectBackend>(options, CgroupRoot::open(instance), instance);
    if (backend->prepare(why) < 0) return nullptr;
    return backend;
}

}  // namespace ptyvisor::backends
