#include "backends/systemd/systemd_session.h"

#include "backends/systemd/unit_usage.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>

#include "backends/exit_status.h"
#include "backends/systemd/session_units.h"
#include "common/process.h"

namespace ptyvisor::backends::systemd {
namespace {

bool ended_state(std::string_view s) { return s == "inactive" || s == "failed"; }

// Reads the a{sv} of Properties.GetAll(org.freedesktop.systemd1.Service).
int read_service_state(sd_bus_message* m, ServiceState& out) {
    int r = sd_bus_message_enter_container(m, 'a', "{sv}");
    if (r < 0) return r;
    while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char* name = nullptr;
        if ((r = sd_bus_message_read(m, "s", &name)) < 0) return r;
        const std::string_view n(name);
        if (n == "MainPID") r = sd_bus_message_read(m, "v", "u", &out.main_pid);
        else if (n == "ExecMainPID") r = sd_bus_message_read(m, "v", "u", &out.exec_main_pid);
        else if (n == "ExecMainCode") r = sd_bus_message_read(m, "v", "i", &out.exec_main_code);
        else if (n == "ExecMainStatus") r = sd_bus_message_read(m, "v", "i", &out.exec_main_status);
        else if (n == "Result") {
            const char* s = nullptr;
            r = sd_bus_message_read(m, "v", "s", &s);
            if (r >= 0 && s) out.result = s;
        } else {
            r = sd_bus_message_skip(m, "v");
        }
        if (r < 0) return r;
        if ((r = sd_bus_message_exit_container(m)) < 0) return r;
    }
    if (r < 0) return r;
    return sd_bus_message_exit_container(m);
}


std::string exec_status_name(int status) {
    switch (status) {
        case 200: return "200/CHDIR: changing to the working directory failed";
        case 203: return "203/EXEC: executing the command failed";
        case 204: return "204/MEMORY: out of memory";
        case 205: return "205/LIMITS: setting resource limits failed";
        case 208: return "208/SIGNAL_MASK";
        case 209: return "209/STDIN: setting up standard input failed";
        case 210: return "210/STDOUT: setting up standard output failed";
        case 216: return "216/GROUP: setting the group failed";
        case 217: return "217/USER: setting the user failed";
        case 218: return "218/CAPABILITIES";
        case 226: return "226/NAMESPACE: setting up the mount namespace failed";
        case 227: return "227/NO_NEW_PRIVILEGES";
        case 228: return "228/SECCOMP";
        default: return std::to_string(status);
    }
}

}  // namespace

bool ran_and_exited(const ServiceState& state) {
    // systemd 252 does not tell "exec failed with 203/EXEC" from "the command ran and
    // exited 203": both fail a Type=exec start job when the exit wins the race with the
    // exec notification. Exit codes must be exact (a command may exit 200..243), so a main
    // process that existed and exited counts as having run. start() resolves the command,
    // the account and the directory first, so a genuine exec failure is rare; it then shows
    // as EXIT 2xx with unit_result "exit-code", and the journal names the failed step.
    return state.exec_main_pid != 0 && state.exec_main_code != 0;
}

protocol::ExitStatus exit_status_from(const ServiceState& state) {
    protocol::ExitStatus s =
        backends::exit_status_from(ChildCode{state.exec_main_code, state.exec_main_status});
    s.unit_result = state.result;
    if (state.result == "timeout") s.reason = protocol::ExitReason::Timeout;
    return s;
}

std::string start_failure_message(const std::string& job_result, const ServiceState& state) {
    std::string msg = "unit failed to start: " + (job_result.empty() ? std::string("failed") : job_result);
    if (state.exec_main_code == CLD_EXITED && state.exec_main_status != 0)
        msg += " (exec status " + exec_status_name(state.exec_main_status) + ")";
    else if (!state.result.empty() && state.result != "success")
        msg += " (result " + state.result + ")";
    return msg;
}

SystemdSession::SystemdSession(std::shared_ptr<BusConnection> conn, std::string unit, uid_t agent,
                               SessionEvents events)
    : conn_(std::move(conn)), unit_(std::move(unit)), path_(unit_object_path(unit_)), agent_(agent),
      events_(std::move(events)) {
    conn_->add_listener(this);
}

SystemdSession::~SystemdSession() {
    *alive_ = false;
    conn_->remove_listener(this);
    if (ref_held_) {
        // Let systemd collect the unit once it is inactive; it keeps running until then.
        // Sent after StartTransientUnit on the same connection, so it is processed after it
        // even if the start is in flight.
        if (MessagePtr m = unit_call("UnrefUnit")) conn_->fire_and_forget(m.get());
    }
}

bool SystemdSession::add_matches() {
    return conn_->add_match(props_match_,
                            std::string("type='signal',sender='") + kSystemdService + "',path='" +
                                path_ + "',interface='" + kPropertiesInterface +
                                "',member='PropertiesChanged'",
                            &SystemdSession::on_properties_changed, this) >= 0;
}

MessagePtr SystemdSession::unit_call(const char* member) const {
    std::string why;
    MessagePtr m = conn_->manager_call(member, why);
    if (m && sd_bus_message_append(m.get(), "s", unit_.c_str()) < 0) m.reset();
    return m;
}

bool SystemdSession::send(MessagePtr m, PendingCalls::Handler on_reply) {
    return m && calls_.call(conn_->bus(), m.get(), std::move(on_reply)) >= 0;
}

bool SystemdSession::begin(const TransientService& service, std::string& why) {
    if (path_.empty()) {
        why = "invalid unit name: " + unit_;
        return false;
    }
    if (!add_matches() || !lifecycle_.watch()) {
        why = "cannot watch unit " + unit_ + " on the bus";
        return false;
    }
    MessagePtr m = build_start_transient_unit(conn_->bus(), service, why);
    if (!m) return false;
    if (!lifecycle_.send_start()) {
        why = "internal error: unit " + unit_ + " started out of order";
        return false;
    }
    const int r =
        calls_.call(conn_->bus(), m.get(), [this](sd_bus_message* reply) { start_replied(reply); });
    if (r < 0) {
        why = "cannot send StartTransientUnit: " + describe_errno(r);
        return false;
    }
    ref_held_ = true;  // AddRef=yes
    return true;
}

bool SystemdSession::adopt(pid_t main_pid, std::string& why) {
    if (path_.empty()) {
        why = "invalid unit name: " + unit_;
        return false;
    }
    auto main = PidRef::pin(main_pid);
    if (!main) {
        why = "the main process is gone";
        return false;
    }
    learn_cgroup(*main);
    if (cgroup_.empty()) {
        why = "the main process is not in unit " + unit_;
        return false;
    }
    watch_oom();
    if (!add_matches() || !lifecycle_.watch() || !lifecycle_.send_start() || !lifecycle_.start()) {
        why = "cannot watch unit " + unit_ + " on the bus";
        return false;
    }
    main_pid_ = main_pid;
    if (!main->by_pid()) {
        UniqueFd fd = std::move(*main).take_pidfd();
        sd_event_source* s = nullptr;
        if (sd_event_add_io(conn_->event(), &s, fd.get(), EPOLLIN, &SystemdSession::on_main_pidfd, this) >= 0) {
            (void)sd_event_source_set_description(s, "main pidfd");
            main_pidfd_source_.reset(s);
            main_pidfd_ = std::move(fd);
        }
    }
    if (!main_pidfd_) main_gone_ = true;
    // The earlier run's reference went with its bus connection: take ours, then re-read.
    ref_held_ = true;
    ref_confirmed_ = false;
    bus_ready(false);
    return true;
}

void SystemdSession::start_replied(sd_bus_message* m) {
    if (!lifecycle_.is(Phase::Starting)) return;
    if (sd_bus_message_is_method_error(m, nullptr)) {
        const sd_bus_error* e = sd_bus_message_get_error(m);
        if (is_transport_error(e)) {
            // systemd went away with our request; whether the unit exists is learnt by resync
            // when it is back (bus_ready), or now if it still answers.
            resync();
            return;
        }
        ref_held_ = false;  // the unit was not created, so we hold no reference
        unit_gone_ = true;
        report_start_failed(std::string("cannot start unit: ") +
                            (e && e->message ? e->message : "unknown error"));
        return;
    }
    const char* job = nullptr;
    if (sd_bus_message_read(m, "o", &job) < 0 || !job) {
        resync();
        return;
    }
    if (const auto result = start_job_.replied(job)) job_finished(*result);
}

void SystemdSession::job_removed(const std::string& job, const std::string& unit,
                                 const std::string& result) {
    if (unit != unit_ || !lifecycle_.is(Phase::Starting)) return;
    if (const auto ours = start_job_.removed(job, result)) job_finished(*ours);
}

void SystemdSession::job_finished(const std::string& result) {
    if (result == "done")
        read_service(Read::Started);
    else
        read_service(Read::StartFailed, result);
}

void SystemdSession::read_service(Read purpose, std::string job_result) {
    sd_bus_message* raw = nullptr;
    int r = conn_->bus() ? sd_bus_message_new_method_call(conn_->bus(), &raw, kSystemdService,
                                                          path_.c_str(), kPropertiesInterface, "GetAll")
                         : -ENOTCONN;
    MessagePtr m(raw);
    if (r >= 0) r = sd_bus_message_append(m.get(), "s", kServiceInterface);
    if (r < 0) m.reset();
    // When it cannot be sent the bus is gone; resync re-reads once it is back.
    send(std::move(m), [this, purpose, job_result = std::move(job_result)](sd_bus_message* reply) {
        service_replied(reply, purpose, job_result);
    });
}

void SystemdSession::service_replied(sd_bus_message* m, Read purpose,
                                     const std::string& job_result) {
    if (sd_bus_message_is_method_error(m, nullptr)) {
        if (is_transport_error(sd_bus_message_get_error(m))) return;  // resync follows bus_ready
        // The unit is not readable: we can no longer tell how it ended.
        unit_vanished();
        return;
    }
    ServiceState state;
    if (read_service_state(m, state) < 0) {
        unit_vanished();
        return;
    }
    service_read(purpose, job_result, state);
}

void SystemdSession::service_read(Read purpose, const std::string& job_result,
                                  const ServiceState& state) {
    switch (purpose) {
        case Read::Started: {
            if (!lifecycle_.is(Phase::Starting)) return;
            const auto guard = alive_;
            mark_started(state);
            if (!*guard) return;
            // ActiveState signals seen so far may predate the start (a new unit is
            // "inactive"); read it now. Replies and signals arrive in order, so every signal
            // after this reply is newer than it.
            read_active_state();
            return;
        }
        case Read::Resync:
            if (!lifecycle_.is(Phase::Starting)) return;
            if (state.exec_main_pid != 0) {
                service_read(Read::Started, job_result, state);
                return;
            }
            [[fallthrough]];
        case Read::StartFailed: {
            if (!lifecycle_.is(Phase::Starting)) return;
            if (ran_and_exited(state)) {
                // Type=exec: when the command exits at once, systemd may handle its SIGCHLD
                // before the exec notification and fail the start job although the command
                // ran. It did run: report a start and its exit, not a start failure.
                const auto guard = alive_;
                mark_started(state);
                if (!*guard) return;
                service_read(Read::Exit, job_result, state);
                return;
            }
            std::string why = start_failure_message(job_result, state);
            release_ref();
            report_start_failed(std::move(why));
            return;
        }
        case Read::Exit: {
            if (!lifecycle_.is(Phase::Running)) return;
            protocol::ExitStatus status = exit_status_from(state);
            if (oom_source_) oom_signalled();
            const auto used = usage();
            // systemd 252 detects an OOM kill from cgroup v2's memory.events only; under v1 it
            // reports the SIGKILL as Result "signal". The v1 memory.oom_control count says
            // the kernel's OOM killer acted in this unit, so say "oom-kill" there too.
            if (state.result == "signal" && state.exec_main_code == CLD_KILLED &&
                state.exec_main_status == SIGKILL && used && used->oom_kills.value_or(0) > 0 && host_ &&
                host_->layout != CgroupLayout::Unified)
                status.unit_result = "oom-kill";
            release_ref();
            report_exited(status);
            return;
        }
    }
}

void SystemdSession::mark_started(const ServiceState& state) {
    if (!lifecycle_.start()) return;
    const pid_t pid = static_cast<pid_t>(state.main_pid != 0 ? state.main_pid : state.exec_main_pid);
    main_pid_ = pid;
    // The unit's cgroup, for SIGNAL, is learnt from its main process. MainPID may already have
    // exited and, in theory, its number been reused: what the pin reads is believed only if
    // it is our unit's, and the process is watched only then. Without a pidfd (valgrind) it
    // cannot be watched, but SIGNAL still works.
    if (auto main = PidRef::pin(pid)) {
        learn_cgroup(*main);
        watch_oom();
        if (!cgroup_.empty() && !main->by_pid()) {
            UniqueFd fd = std::move(*main).take_pidfd();
            sd_event_source* s = nullptr;
            if (sd_event_add_io(conn_->event(), &s, fd.get(), EPOLLIN, &SystemdSession::on_main_pidfd,
                                this) >= 0) {
                (void)sd_event_source_set_description(s, "main pidfd");
            main_pidfd_source_.reset(s);
                main_pidfd_ = std::move(fd);
            }
        }
    }
    if (!main_pidfd_) main_gone_ = true;
    if (events_.on_started) events_.on_started(pid);
}

int SystemdSession::on_main_pidfd(sd_event_source*, int, uint32_t, void* userdata) {
    auto* self = static_cast<SystemdSession*>(userdata);
    self->main_process_gone();
    return 0;
}

void SystemdSession::main_process_gone() {
    // The cgroup's figures, while systemd has not removed it yet; and a pending OOM signal.
    if (oom_source_) oom_signalled();
    (void)usage();
    main_gone_ = true;
    main_pidfd_source_.reset();
    check_stop_done();
}

int SystemdSession::on_properties_changed(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<SystemdSession*>(userdata);
    const char* iface = nullptr;
    if (sd_bus_message_read(m, "s", &iface) < 0 || std::string_view(iface) != kUnitInterface) return 0;
    std::string active_state;
    bool invalidated = false;
    int r = sd_bus_message_enter_container(m, 'a', "{sv}");
    if (r < 0) return 0;
    while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char* name = nullptr;
        if (sd_bus_message_read(m, "s", &name) < 0) return 0;
        if (std::string_view(name) == "ActiveState") {
            const char* s = nullptr;
            if (sd_bus_message_read(m, "v", "s", &s) < 0) return 0;
            active_state = s ? s : "";
        } else if (sd_bus_message_skip(m, "v") < 0) {
            return 0;
        }
        if (sd_bus_message_exit_container(m) < 0) return 0;
    }
    if (r < 0 || sd_bus_message_exit_container(m) < 0) return 0;
    char** names = nullptr;
    if (sd_bus_message_read_strv(m, &names) >= 0 && names) {
        for (char** n = names; *n; ++n) {
            if (std::string_view(*n) == "ActiveState") invalidated = true;
            std::free(*n);
        }
        std::free(static_cast<void*>(names));
    }
    if (invalidated && active_state.empty()) {
        self->resync();
        return 0;
    }
    // While starting, ActiveState is not trusted: the read after the start decides.
    if (ended_state(active_state) && self->lifecycle_.is(Phase::Running))
        self->read_service(Read::Exit);
    return 0;
}

void SystemdSession::release_ref() {
    if (!ref_held_) {
        check_gone();
        return;
    }
    ref_held_ = false;
    send(unit_call("UnrefUnit"), [this](sd_bus_message*) { check_gone(); });
}

void SystemdSession::check_gone() {
    if (unit_gone_) {
        check_stop_done();
        return;
    }
    // Either GetUnit says NoSuchUnit, or the unit still exists and UnitRemoved follows: the
    // signal cannot overtake the reply, since systemd answers us in order.
    send(unit_call("GetUnit"), [this](sd_bus_message* reply) { get_unit_replied(reply); });
}

void SystemdSession::get_unit_replied(sd_bus_message* m) {
    if (!sd_bus_message_is_method_error(m, "org.freedesktop.systemd1.NoSuchUnit")) return;
    if (!lifecycle_.finished()) {
        unit_vanished();
        return;
    }
    unit_gone_ = true;
    check_stop_done();
}

void SystemdSession::unit_removed(const std::string& unit) {
    if (unit != unit_ || unit_gone_ || lifecycle_.before_start()) return;
    if (lifecycle_.is(Phase::Starting) && start_job_.awaiting_reply()) {
        // A failed StartTransientUnit may create and drop the unit; its reply says why.
        unit_gone_ = true;
        return;
    }
    // Confirm: an exiting manager (daemon-reexec) announces every unit as removed, and the
    // new one brings them back. GetUnit is answered after the signal, by whoever is PID 1 by
    // then; a transport error waits for bus_ready's resync.
    send(unit_call("GetUnit"), [this](sd_bus_message* reply) { get_unit_replied(reply); });
}

void SystemdSession::unit_vanished() {
    unit_gone_ = true;
    ref_held_ = false;
    const auto guard = alive_;
    if (lifecycle_.is(Phase::Starting)) {
        report_start_failed("unit " + unit_ + " vanished before it started");
    } else if (lifecycle_.is(Phase::Running)) {
        protocol::ExitStatus lost;
        lost.kind = protocol::ExitStatus::Kind::Unknown;
        lost.reason = protocol::ExitReason::BackendFailed;
        report_exited(lost);
    }
    if (!*guard) return;
    check_stop_done();
}

void SystemdSession::report_start_failed(std::string why) {
    if (!lifecycle_.fail_start()) return;
    const auto guard = alive_;
    if (events_.on_start_failed) events_.on_start_failed(std::move(why));
    if (!*guard) return;
    check_stop_done();
}

void SystemdSession::report_exited(protocol::ExitStatus status) {
    if (!lifecycle_.end()) return;
    const auto guard = alive_;
    if (events_.on_exited) events_.on_exited(std::move(status));
    if (!*guard) return;
    check_stop_done();
}

void SystemdSession::watch_oom() {
    if (!host_ || host_->layout == CgroupLayout::Unified || !host_->memory || cgroup_.empty() || oom_eventfd_)
        return;
    const std::string dir = "/sys/fs/cgroup/memory" + cgroup_;
    UniqueFd control(::open((dir + "/memory.oom_control").c_str(), O_RDONLY | O_CLOEXEC));
    UniqueFd events(::open((dir + "/cgroup.event_control").c_str(), O_WRONLY | O_CLOEXEC));
    UniqueFd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!control || !events || !efd) return;
    const std::string line = std::to_string(efd.get()) + " " + std::to_string(control.get());
    if (::write(events.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) return;
    sd_event_source* s = nullptr;
    if (sd_event_add_io(conn_->event(), &s, efd.get(), EPOLLIN, &SystemdSession::on_oom_event, this) < 0) return;
    (void)sd_event_source_set_description(s, "memory.oom_control");
    oom_source_.reset(s);
    oom_eventfd_ = std::move(efd);
    // The kernel holds its own references to both files: ours close here. An OOM kill
    // before the registration is in the file already.
    oom_signalled();
}

int SystemdSession::on_oom_event(sd_event_source*, int, uint32_t, void* userdata) {
    static_cast<SystemdSession*>(userdata)->oom_signalled();
    return 0;
}

void SystemdSession::oom_signalled() {
    std::uint64_t n = 0;
    if (::read(oom_eventfd_.get(), &n, sizeof n) == static_cast<ssize_t>(sizeof n)) oom_signals_ += n;
    const auto text = read_small_file("/sys/fs/cgroup/memory" + cgroup_ + "/memory.oom_control");
    if (text) {
        // Signalled while the cgroup exists: only the OOM killer signals then (with
        // oom_kill_disable 0 it is about to kill; oom_kill may not count it yet).
        if (n > 0 || keyed_value(*text, "under_oom").value_or(0) > 0 ||
            keyed_value(*text, "oom_kill").value_or(0) > 0)
            oom_seen_ = true;
        (void)usage();
    } else {
        // Removed: that is one signal; any other was the OOM killer's. (The removal's own
        // signal may still be on its way: the source stays, to count it.)
        if (oom_signals_ >= 2) oom_seen_ = true;
    }
}

std::optional<SessionUsage> SystemdSession::usage() const {
    if (!host_ || unit_gone_) return last_usage_;
    // Learnt from the main process; where it had exited before that (a command that ends at
    // once), the path systemd gives a unit of our slice: the daemon runs in systemd's cgroup
    // namespace (it is one of its services), so both see the same root.
    const std::string cgroup = !cgroup_.empty() ? cgroup_ : "/" + std::string(kSessionSlice) + "/" + unit_;
    auto now = read_unit_usage(*host_, cgroup);
    if (now && oom_seen_ && now->oom_kills.value_or(0) == 0) now->oom_kills = 1;
    if (!now) {
        if (oom_seen_ && last_usage_ && last_usage_->oom_kills.value_or(0) == 0) last_usage_->oom_kills = 1;
        return last_usage_;
    }
    // A read that raced with the cgroup's removal may miss some files: keep what was read
    // before for those.
    if (last_usage_) {
        auto keep = [](std::optional<std::uint64_t>& fresh, const std::optional<std::uint64_t>& old) {
            if (!fresh) fresh = old;
        };
        const SessionUsage& old = *last_usage_;
        keep(now->cpu_usec, old.cpu_usec);
        keep(now->memory_current, old.memory_current);
        keep(now->memory_peak, old.memory_peak);
        keep(now->tasks_current, old.tasks_current);
        keep(now->tasks_peak, old.tasks_peak);
        keep(now->oom_kills, old.oom_kills);
        keep(now->tasks_limit_hits, old.tasks_limit_hits);
        keep(now->io_read_bytes, old.io_read_bytes);
        keep(now->io_write_bytes, old.io_write_bytes);
    }
    last_usage_ = std::move(now);
    return last_usage_;
}

void SystemdSession::learn_cgroup(const PidRef& process) {
    // A process in our unit is ours, whichever PID it has; a stranger's cgroup is not.
    const auto cg = process.cgroup();
    if (cg && cgroup_leaf(*cg) == unit_) cgroup_ = *cg;
}

SessionMembers SystemdSession::members() {
    SessionMembers m;
    m.agent = agent_;
    // Not learnt at start (the main process was not readable then): try again now.
    if (cgroup_.empty() && !unit_gone_)
        if (const auto main = PidRef::pin(main_pid_)) learn_cgroup(*main);
    if (cgroup_.empty() || unit_gone_) return m;  // no members: -ESRCH
    if (const auto mount = cgroup2_mount()) {
        m.cgroup_dir = *mount + cgroup_;
        m.cgroup = cgroup_;
    }
    return m;
}

int SystemdSession::signal_all(int sig) { return signal_members(members(), sig); }

int SystemdSession::signal_foreground_group(pid_t pgid, int sig) {
    return signal_member_group(members(), pgid, sig);
}

// Cleanup only: systemd signals every process of the unit, whoever it runs as.
void SystemdSession::kill_unit(int sig) {
    if (unit_gone_) return;
    MessagePtr m = unit_call("KillUnit");
    if (m && sd_bus_message_append(m.get(), "si", "all", sig) >= 0) conn_->fire_and_forget(m.get());
}

void SystemdSession::stop(Clock::time_point deadline,
                          std::function<void(bool ok, std::string why)> done) {
    // A second stop() while one is in flight waits for the same outcome.
    stop_done_.push_back(std::move(done));
    if (stopping_ && stop_done_.size() > 1) return;
    stopping_ = true;
    sd_event_source* s = nullptr;
    const auto usec = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(deadline.time_since_epoch()).count());
    if (sd_event_add_time(conn_->event(), &s, CLOCK_MONOTONIC, usec, 0,
                          &SystemdSession::on_stop_deadline, this) >= 0)
        stop_timer_.reset(s);
    send_stop();
    // done() must come from the loop, never from inside stop().
    s = nullptr;
    if (sd_event_add_defer(conn_->event(), &s, &SystemdSession::on_deferred, this) >= 0)
        deferred_.reset(s);
}

void SystemdSession::send_stop() {
    if (unit_gone_) return;
    if (lifecycle_.finished() && !ref_held_) {
        // Already inactive; systemd collects it. Nothing to stop, only to see it go.
        check_gone();
        return;
    }
    MessagePtr m = unit_call("StopUnit");
    if (m && sd_bus_message_append(m.get(), "s", "replace") < 0) m.reset();
    if (send(std::move(m), [this](sd_bus_message* reply) { stop_replied(reply); }))
        stop_sent_ = true;
}

void SystemdSession::stop_replied(sd_bus_message* m) {
    if (!sd_bus_message_is_method_error(m, nullptr)) return;
    const sd_bus_error* e = sd_bus_message_get_error(m);
    if (sd_bus_error_has_name(e, "org.freedesktop.systemd1.NoSuchUnit")) {
        unit_vanished();  // an already-gone unit counts as stopped
        return;
    }
    if (is_transport_error(e)) {
        stop_sent_ = false;  // resync sends it again
        return;
    }
    finish_stop(false, "cannot stop unit " + unit_ + ": " +
                           (e && e->message ? e->message : "unknown error"));
}

int SystemdSession::on_deferred(sd_event_source*, void* userdata) {
    auto* self = static_cast<SystemdSession*>(userdata);
    self->deferred_.reset();
    self->check_stop_done();
    return 0;
}

void SystemdSession::check_stop_done() {
    if (!stopping_ || stop_done_.empty() || deferred_) return;
    // The main process counts as gone when we never had a pidfd on it (it never started,
    // or had already exited when the start was confirmed).
    if (unit_gone_ && (main_gone_ || !main_pidfd_)) finish_stop(true, {});
}

void SystemdSession::finish_stop(bool ok, std::string why) {
    stop_timer_.reset();
    auto waiters = std::move(stop_done_);
    stop_done_.clear();
    stopping_ = false;
    // Each waiter may destroy this session: nothing of ours is touched after the first call
    // unless we are still alive.
    const auto guard = alive_;
    for (auto& done : waiters) {
        if (done) done(ok, why);
        if (!*guard) return;
    }
}

int SystemdSession::on_stop_deadline(sd_event_source*, uint64_t, void* userdata) {
    auto* self = static_cast<SystemdSession*>(userdata);
    self->kill_unit(SIGKILL);
    self->finish_stop(false, "unit " + self->unit_ + " did not stop in time");
    return 0;
}

void SystemdSession::bus_lost() {
    props_match_.reset();
    calls_.clear();
    stop_sent_ = false;
}

void SystemdSession::bus_ready(bool new_bus) {
    if (lifecycle_.before_start()) return;  // begin() has not sent anything to re-read
    if (new_bus) {
        add_matches();
        // Our reference belonged to the old connection: take one on this one, and keep
        // trying on every bus_ready until systemd confirms it.
        if (ref_held_) ref_confirmed_ = false;
    }
    if (ref_held_ && !ref_confirmed_) {
        send(unit_call("RefUnit"), [this](sd_bus_message* reply) {
            // NoSuchUnit: resync's GetUnit reports the unit as vanished. Transport errors:
            // retried on the next bus_ready.
            if (!sd_bus_message_is_method_error(reply, nullptr)) ref_confirmed_ = true;
        });
    }
    resync();
}

void SystemdSession::read_active_state() {
    sd_bus_message* raw = nullptr;
    int r = conn_->bus() ? sd_bus_message_new_method_call(conn_->bus(), &raw, kSystemdService,
                                                          path_.c_str(), kPropertiesInterface, "Get")
                         : -ENOTCONN;
    MessagePtr m(raw);
    if (r >= 0) r = sd_bus_message_append(m.get(), "ss", kUnitInterface, "ActiveState");
    if (r < 0) m.reset();
    send(std::move(m), [this](sd_bus_message* reply) { active_state_replied(reply); });
}

void SystemdSession::resync() {
    if (lifecycle_.finished()) {
        if (stopping_) check_gone();
        return;
    }
    // GetUnit does not load a unit that is gone (a property read on its path would).
    send(unit_call("GetUnit"), [this](sd_bus_message* reply) {
        if (sd_bus_message_is_method_error(reply, nullptr)) {
            if (sd_bus_message_is_method_error(reply, "org.freedesktop.systemd1.NoSuchUnit"))
                unit_vanished();
            return;  // transport errors: the next bus_ready retries
        }
        read_active_state();
    });
}

void SystemdSession::active_state_replied(sd_bus_message* m) {
    if (sd_bus_message_is_method_error(m, nullptr)) return;
    const char* state = nullptr;
    if (sd_bus_message_read(m, "v", "s", &state) < 0 || !state) return;
    const std::string_view s(state);
    if (stopping_ && !stop_sent_ && !ended_state(s)) send_stop();
    if (lifecycle_.is(Phase::Starting)) {
        if (s == "activating") {
            // The start job is still running. If its reply was lost we do not know the job
            // path; the unit's next JobRemoved is then ours.
            start_job_.reply_lost();
            return;
        }
        read_service(Read::Resync, ended_state(s) ? "failed" : "done");
    } else if (lifecycle_.is(Phase::Running) && ended_state(s)) {
        read_service(Read::Exit);
    }
}

}  // namespace ptyvisor::backends::systemd
