// SystemdSession: one session's transient service, followed through D-Bus signals.
//
// Life of a session, all on the event loop (the orders it relies on are checked by
// session_lifecycle.h):
//   begin():   a match for PropertiesChanged on the unit's object path is installed, then
//              StartTransientUnit is sent (JobRemoved and UnitRemoved are matched once per
//              connection by BusConnection, before anything else). The bus handles one
//              connection's messages in order, so no signal about the unit can be missed.
//              JobRemoved may arrive before the reply that names the job: such signals are
//              kept and matched against the job path when the reply comes.
//   started:   JobRemoved "done" (Type=exec: after the execve) -> GetAll(Service) gives MainPID
//              (or ExecMainPID if it already exited) -> a pidfd on it -> on_started.
//   exited:    ActiveState inactive/failed -> GetAll(Service) -> ExecMainCode/Status and Result
//              -> UnrefUnit -> on_exited. The unit was started with AddRef=yes, so systemd keeps
//              it (and its exit status) until that UnrefUnit, whatever CollectMode says: the
//              read cannot race with garbage collection.
//   stop():    StopUnit(replace); done when the unit is gone (UnitRemoved, or NoSuchUnit) and
//              the main process's pidfd has polled readable; KillUnit(SIGKILL) at the deadline.
// After a systemd re-execution or a bus reconnect the session re-reads its state (resync),
// so a unit that ended in the gap still produces on_exited. Across daemon-reexec systemd keeps
// our reference (it serialises it), so the exact status survives. Across a bus reconnect the
// reference belonged to the old connection: it is re-taken (RefUnit, retried until systemd
// confirms), but a unit that ended *and* was collected before that can no longer tell its
// status; on_exited then reports Kind::Unknown with reason BackendFailed.
// Every method call has a slot of its own (pending_calls.h): no call cancels another.
// Destroying the session without stop() leaves the unit running (backend.h): it only drops
// our reference, so that systemd collects the unit once it is inactive.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/session_signals.h"
#include "backends/systemd/bus_connection.h"
#include "backends/systemd/host_enforcement.h"
#include "backends/systemd/pending_calls.h"
#include "backends/systemd/sd_ptr.h"
#include "backends/systemd/session_lifecycle.h"
#include "backends/systemd/unit_properties.h"
#include "common/event.h"
#include "common/process.h"

namespace ptyvisor::backends::systemd {

// The parts of org.freedesktop.systemd1.Service a session reads.
struct ServiceState {
    std::uint32_t main_pid = 0;
    std::uint32_t exec_main_pid = 0;
    std::int32_t exec_main_code = 0;    // CLD_EXITED, CLD_KILLED, CLD_DUMPED or 0
    std::int32_t exec_main_status = 0;  // exit code or signal number
    std::string result;                 // "success", "exit-code", "timeout", ...
};

// Maps a finished service's state to the protocol's ExitStatus.
protocol::ExitStatus exit_status_from(const ServiceState& state);

// Whether a service whose start job failed had in fact exec'd its command, which then exited.
bool ran_and_exited(const ServiceState& state);

// "unit failed to start: <result>", with the exec status when systemd gives one.
std::string start_failure_message(const std::string& job_result, const ServiceState& state);

class SystemdSession final : public SessionProcesses, private ConnectionListener {
public:
    // `agent`: the account the unit runs as; a client's SIGNAL reaches only its processes.
    SystemdSession(std::shared_ptr<BusConnection> conn, std::string unit, uid_t agent,
                   SessionEvents events);
    ~SystemdSession() override;
    SystemdSession(const SystemdSession&) = delete;
    SystemdSession& operator=(const SystemdSession&) = delete;

    // Installs the matches and sends StartTransientUnit. False with `why` on a local failure.
    bool begin(const TransientService& service, std::string& why);
    // Instead of begin(), for a unit an earlier run of the daemon started (backend.h adopt()):
    // the session is Running with `main_pid`, which must be alive and in our unit; our
    // reference on the unit is taken again and its state re-read, as after a bus reconnect,
    // so that a unit that ended meanwhile still reports its exit.
    bool adopt(pid_t main_pid, std::string& why);

    [[nodiscard]] const std::string& unit() const override { return unit_; }
    [[nodiscard]] pid_t main_pid() const override { return main_pid_; }
    // Not KillUnit: systemd would signal as root, reaching processes the agent could not.
    // The unit's cgroup is learnt from its main process when it starts; before that (or
    // when the main process had already exited then) these return -ESRCH.
    int signal_all(int sig) override;
    int signal_foreground_group(pid_t pgid, int sig) override;
    void stop(Clock::time_point deadline, std::function<void(bool ok, std::string why)> done) override;
    // Read from the unit's cgroup files (unit_usage.h) while they exist. systemd removes the
    // cgroup as soon as the unit is inactive (252 keeps no figures of an inactive unit
    // either), so the last figures read are kept and answered until the session is
    // destroyed: they are refreshed when the main process exits (its pidfd polls readable,
    // usually before systemd has reaped it and removed the cgroup) and at every call.
    [[nodiscard]] std::optional<SessionUsage> usage() const override;
    // Where usage() reads from; without it, usage() is nullopt.
    void set_host(std::shared_ptr<const HostEnforcement> host) { host_ = std::move(host); }

private:
    using Phase = Lifecycle::Phase;
    // Why the Service properties are read; each read carries its own.
    enum class Read { Started, StartFailed, Exit, Resync };

    bool add_matches();
    // A Manager method call whose first argument is our unit's name.
    [[nodiscard]] MessagePtr unit_call(const char* member) const;
    // Sends `m`, if it could be built, with a slot of its own. False when the bus is gone:
    // bus_ready's resync asks again.
    bool send(MessagePtr m, PendingCalls::Handler on_reply);

    void start_replied(sd_bus_message* reply);
    void job_finished(const std::string& result);
    void read_service(Read purpose, std::string job_result = {});
    void service_replied(sd_bus_message* reply, Read purpose, const std::string& job_result);
    void service_read(Read purpose, const std::string& job_result, const ServiceState& state);
    void mark_started(const ServiceState& state);
    void release_ref();
    void check_gone();
    void get_unit_replied(sd_bus_message* reply);
    void unit_vanished();
    void main_process_gone();
    void check_stop_done();
    void finish_stop(bool ok, std::string why);
    void send_stop();
    void stop_replied(sd_bus_message* reply);
    void resync();
    void read_active_state();
    void active_state_replied(sd_bus_message* reply);
    [[nodiscard]] SessionMembers members();
    // Sets cgroup_ from `process`'s cgroup, if that is our unit's.
    void learn_cgroup(const PidRef& process);
    // Registers oom_eventfd_ (v1 hosts with the memory controller), once cgroup_ is known.
    void watch_oom();
    void oom_signalled();
    static int on_oom_event(sd_event_source* s, int fd, uint32_t revents, void* userdata);
    void kill_unit(int sig);
    void report_start_failed(std::string why);
    void report_exited(protocol::ExitStatus status);

    void bus_lost() override;
    void bus_ready(bool new_bus) override;
    void job_removed(const std::string& job, const std::string& unit,
                     const std::string& result) override;
    void unit_removed(const std::string& unit) override;

    static int on_properties_changed(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int on_main_pidfd(sd_event_source* s, int fd, uint32_t revents, void* userdata);
    static int on_stop_deadline(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_deferred(sd_event_source* s, void* userdata);

    std::shared_ptr<BusConnection> conn_;
    std::string unit_;
    std::string path_;
    uid_t agent_;
    std::string cgroup_;  // the unit's cgroup, as /proc/PID/cgroup shows it; empty until known
    std::shared_ptr<const HostEnforcement> host_;
    mutable std::optional<SessionUsage> last_usage_;  // the last figures usage() could read
    // cgroup v1 only (systemd 252 reports no OOM kill there): an eventfd registered for the
    // unit's memory.oom_control (cgroup.event_control). The kernel signals it when the OOM
    // killer is about to act in the cgroup, and once more when the cgroup is removed, so
    // the signal is not lost when systemd removes the cgroup before we read it.
    UniqueFd oom_eventfd_;
    EventSource oom_source_;
    std::uint64_t oom_signals_ = 0;
    bool oom_seen_ = false;
    SessionEvents events_;
    // Set to false by the destructor; copied before calling out, so that a callback that
    // destroys this session is noticed.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

    Lifecycle lifecycle_;
    StartJob start_job_;
    pid_t main_pid_ = 0;
    UniqueFd main_pidfd_;
    EventSource main_pidfd_source_;
    bool main_gone_ = false;

    SlotPtr props_match_;
    PendingCalls calls_;

    bool ref_held_ = false;     // from StartTransientUnit (AddRef=yes) until UnrefUnit
    bool ref_confirmed_ = true; // false after a reconnect until RefUnit succeeds
    bool unit_gone_ = false;

    bool stopping_ = false;
    bool stop_sent_ = false;
    std::vector<std::function<void(bool, std::string)>> stop_done_;
    EventSource stop_timer_;
    EventSource deferred_;
};

}  // namespace ptyvisor::backends::systemd
