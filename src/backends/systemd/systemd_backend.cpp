#include "backends/systemd/systemd_backend.h"

#include <pwd.h>

#include <grp.h>
#include <unistd.h>

#include <cstdlib>
#include <set>

#include "backends/systemd/bus_connection.h"
#include "backends/systemd/host_enforcement.h"
#include "backends/systemd/main_pid_tracker.h"
#include "backends/systemd/profile_properties.h"
#include "backends/systemd/session_units.h"
#include "backends/systemd/systemd_session.h"
#include "backends/systemd/unit_properties.h"
#include "common/linux.h"
#include "common/log.h"
#include "common/process.h"

namespace ptyvisor::backends {

using namespace ptyvisor::backends::systemd;

namespace {

std::string group_name(gid_t gid) {
    std::vector<char> buf(16384);
    struct group gr {};
    struct group* found = nullptr;
    if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found && found->gr_name)
        return found->gr_name;
    return std::to_string(gid);  // systemd accepts a numeric Group= too
}

std::string describe(const std::vector<std::string>& argv) {
    std::string d = "ptyvisor session:";
    for (const auto& a : argv) {
        d += ' ';
        d += a;
        if (d.size() > 200) {
            d.resize(200);
            d += "...";
            break;
        }
    }
    // Description= goes through specifier expansion only in unit files, but keep it tidy.
    for (char& c : d)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return d;
}

struct Listed {
    std::string name;
    std::string active_state;
};

bool list_session_units(sd_bus* bus, const std::string& prefix, std::vector<Listed>& out,
                        std::string& why) {
    BusError error;
    sd_bus_message* raw = nullptr;
    const std::string glob = session_unit_glob(prefix);
    int r = sd_bus_call_method(bus, kSystemdService, kManagerPath, kManagerInterface,
                               "ListUnitsByPatterns", error.get(), &raw, "asas", 0, 1, glob.c_str());
    MessagePtr reply(raw);
    if (r < 0) {
        why = "ListUnitsByPatterns failed: " + (error.is_set() ? error.message() : describe_errno(r));
        return false;
    }
    out.clear();
    r = sd_bus_message_enter_container(reply.get(), 'a', "(ssssssouso)");
    while (r > 0) {
        const char *name = nullptr, *desc = nullptr, *load = nullptr, *active = nullptr,
                   *sub = nullptr, *following = nullptr, *path = nullptr, *job_type = nullptr,
                   *job_path = nullptr;
        std::uint32_t job_id = 0;
        r = sd_bus_message_read(reply.get(), "(ssssssouso)", &name, &desc, &load, &active, &sub,
                                &following, &path, &job_id, &job_type, &job_path);
        if (r > 0 && is_session_unit_name(name, prefix)) out.push_back({name, active});
    }
    if (r < 0) {
        why = "cannot parse ListUnitsByPatterns reply: " + describe_errno(r);
        return false;
    }
    return true;
}

struct JobWait {
    std::set<std::string> pending;
    std::set<std::string> removed;
};

int on_cleanup_job_removed(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* wait = static_cast<JobWait*>(userdata);
    std::uint32_t id = 0;
    const char *job = nullptr, *unit = nullptr, *result = nullptr;
    if (sd_bus_message_read(m, "uoss", &id, &job, &unit, &result) >= 0 && job) {
        wait->removed.insert(job);
        wait->pending.erase(job);
    }
    return 0;
}

std::uint64_t usec_until(Clock::time_point deadline) {
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(left).count());
}

}  // namespace

SystemdBackend::SystemdBackend(BackendOptions options, std::shared_ptr<BusConnection> conn,
                               std::unique_ptr<MainPidTracker> tracker)
    : options_(std::move(options)), conn_(std::move(conn)), tracker_(std::move(tracker)),
      host_(std::make_shared<const HostEnforcement>()) {}

void SystemdBackend::set_host(HostEnforcement host) {
    host_ = std::make_shared<const HostEnforcement>(std::move(host));
}

bool SystemdBackend::check_profile(const SandboxProfile& profile, std::string& why) const {
    return check_profile_on(*host_, profile, why);
}

SystemdBackend::~SystemdBackend() = default;

bool SystemdBackend::cleanup_orphans(Clock::time_point deadline, std::string& why) {
    sd_bus* bus = conn_->bus();
    if (!bus) {
        why = "not connected to the system bus";
        return false;
    }
    // Start-up only: synchronous calls are allowed here. The JobRemoved match goes in before
    // any StopUnit, so no stop job can finish unseen.
    JobWait wait;
    sd_bus_slot* raw_slot = nullptr;
    int r = sd_bus_add_match(bus, &raw_slot,
                             "type='signal',sender='org.freedesktop.systemd1',"
                             "path='/org/freedesktop/systemd1',"
                             "interface='org.freedesktop.systemd1.Manager',member='JobRemoved'",
                             &on_cleanup_job_removed, &wait);
    SlotPtr match(raw_slot);
    if (r < 0) {
        why = "cannot watch systemd jobs: " + describe_errno(r);
        return false;
    }
    std::vector<Listed> units;
    if (!list_session_units(bus, options_.unit_prefix, units, why)) return false;
    for (const auto& u : units) {
        if (adopted_.contains(u.name)) continue;  // taken back from the fd store: it runs on
        BusError error;
        sd_bus_message* raw = nullptr;
        if (u.active_state == "inactive" || u.active_state == "failed") {
            // Nothing runs; let systemd collect it.
            sd_bus_call_method(bus, kSystemdService, kManagerPath, kManagerInterface,
                               "ResetFailedUnit", nullptr, nullptr, "s", u.name.c_str());
            continue;
        }
        r = sd_bus_call_method(bus, kSystemdService, kManagerPath, kManagerInterface, "StopUnit",
                               error.get(), &raw, "ss", u.name.c_str(), "replace");
        MessagePtr reply(raw);
        if (r < 0) {
            if (error.has_name("org.freedesktop.systemd1.NoSuchUnit")) continue;
            why = "cannot stop leftover unit " + u.name + ": " +
                  (error.is_set() ? error.message() : describe_errno(r));
            return false;
        }
        const char* job = nullptr;
        if (sd_bus_message_read(reply.get(), "o", &job) > 0 && job && !wait.removed.count(job))
            wait.pending.insert(job);
        log_info("cleaned up orphan session", {{"UNIT", u.name}});
    }
    while (!wait.pending.empty()) {
        r = sd_bus_process(bus, nullptr);
        if (r < 0) {
            why = "bus failed while stopping leftover units: " + describe_errno(r);
            return false;
        }
        if (r > 0) continue;
        const std::uint64_t left = usec_until(deadline);
        if (left == 0) break;
        sd_bus_wait(bus, left);
    }
    if (!list_session_units(bus, options_.unit_prefix, units, why)) return false;
    std::string still;
    for (const auto& u : units)
        if (u.active_state != "inactive" && u.active_state != "failed" && !adopted_.contains(u.name))
            still += (still.empty() ? "" : ", ") + u.name + " (" + u.active_state + ")";
    // Quarantined, not fatal: a unit whose processes the kernel cannot end yet (blocked in a
    // request that is never answered) kept the daemon from starting, for good. Its stop job
    // goes on in systemd; the next start looks again.
    if (!still.empty())
        log_error("leftover session units did not stop in time; quarantined, serving on", {{"UNITS", still}});
    return true;
}

namespace {

// The systemd backend's Resolver (see backend.h): on a worker thread, as the agent.
bool resolve_for_unit(SessionSpec& spec, std::string& why) {
    // What systemd would only find out after fork (and report as exit status 217/USER,
    // indistinguishable from a command exiting 217) is checked here, where it is an error.
    if (!spec.account.name.empty()) {
        std::vector<char> buf(16384);
        passwd pw{};
        passwd* found = nullptr;
        if (::getpwnam_r(spec.account.name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found ||
            pw.pw_uid != spec.account.uid) {
            why = "the account " + spec.account.name + " no longer exists as configured";
            return false;
        }
    }
    if (spec.argv.empty()) {
        why = "empty command";
        return false;
    }
    return working_directory_path(spec.cwd, spec.cwd_dev, spec.cwd_ino, spec.cwd_path, why) &&
           resolve_executable(spec.argv.front(), spec.env, spec.cwd_path, spec.account.uid,
                              spec.account.gid, spec.account.groups, spec.exec_path, why);
}

// The peer's cgroup, confirmed to be the peer's (common/process.h). `pid` is the peer's PID,
// read from its pidfd; a caller that has no pidfd gets what its bare PID can give.
std::optional<std::string> peer_cgroup(const Peer& peer, pid_t pid) {
    if (peer.pidfd >= 0) return process_cgroup(peer.pidfd);
    const auto process = PidRef::pin(pid);
    return process ? process->cgroup() : std::nullopt;
}

}  // namespace

Resolver SystemdBackend::resolver() const { return &resolve_for_unit; }

std::unique_ptr<SessionProcesses> SystemdBackend::start(SessionSpec spec, SessionEvents events,
                                               std::string& why) {
    if (!is_session_unit_name(spec.unit_name, options_.unit_prefix)) {
        why = "invalid session unit name: " + spec.unit_name;
        return nullptr;
    }
    if (spec.argv.empty()) {
        why = "empty command";
        return nullptr;
    }
    if (!spec.tty) {
        why = "no terminal for the session";
        return nullptr;
    }
    if (!conn_->connected()) {
        why = "not connected to the system bus";
        return nullptr;
    }
    if (spec.exec_path.empty() || spec.cwd_path.empty()) {
        why = "the command was not resolved before start";
        return nullptr;
    }
    TransientService svc;
    svc.unit = spec.unit_name;
    svc.working_directory = spec.cwd_path;
    svc.exec_path = spec.exec_path;
    if (!translate_properties(spec.properties, svc.extra, why)) return nullptr;
    svc.limits = spec.limits;
    svc.description = describe(spec.argv);
    svc.slice = std::string(kSessionSlice);
    svc.user = spec.account.name.empty() ? std::to_string(spec.account.uid) : spec.account.name;
    svc.group = group_name(spec.account.gid);
    svc.argv = spec.argv;
    svc.env = spec.env;
    svc.tty_fd = spec.tty.get();
    svc.tty_path = spec.tty_path;
    // With one allowed unit, every session is that agent's: it gets the agent's sandbox. (With
    // several, the server does not say which peer asked; see docs/configuration.md.)
    if (options_.allowed_units.size() == 1) {
        svc.agent_unit = options_.allowed_units.front();
        svc.agent_properties = tracker_->service_properties(svc.agent_unit);
    }
    if (spec.profile) {
        // The server asked check_profile() already; asked again, since the host cannot
        // change but a caller may forget: never start a session less confined than it says.
        if (!check_profile_on(*host_, *spec.profile, why)) return nullptr;
        std::vector<std::string> dropped;
        apply_profile(*spec.profile, spec.cwd_path, inherited_filesystem(svc.agent_properties, svc.extra),
                      svc.extra, dropped);
        for (const auto& path : dropped)
            log_info("profile's writable path stays read-only: the agent's sandbox or [session.properties] keeps it so",
                     {{"UNIT", spec.unit_name}, {"PROFILE", spec.profile->name}, {"PATH", path}});
    }

    auto session = std::make_unique<SystemdSession>(conn_, spec.unit_name, spec.account.uid,
                                                    std::move(events));
    session->set_host(host_);
    if (!session->begin(svc, why)) return nullptr;
    // `spec` (and our copy of the tty) closes here; the message carries its own dup.
    return session;
}

// A unit of ours whose main process is the one the handover names, and in that unit.
std::unique_ptr<SessionProcesses> SystemdBackend::adopt(const Adoption& spec, SessionEvents events, std::string& why) {
    if (!is_session_unit_name(spec.unit, options_.unit_prefix)) {
        why = "invalid session unit name: " + spec.unit;
        return nullptr;
    }
    if (!conn_->connected()) {
        why = "not connected to the system bus";
        return nullptr;
    }
    auto session = std::make_unique<SystemdSession>(conn_, spec.unit, spec.agent, std::move(events));
    session->set_host(host_);
    if (!session->adopt(spec.main_pid, why)) return nullptr;
    adopted_.insert(spec.unit);
    return session;
}

PeerVerdict SystemdBackend::check_peer(const Peer& peer, std::string& why) {
    const pid_t pid = peer.pidfd >= 0 ? pidfd_to_pid(peer.pidfd) : peer.pid;
    if (pid <= 0) {
        why = pid == 0 ? "peer is outside our PID namespace" : "peer has exited";
        return PeerVerdict::Refused;
    }
    const auto cgroup = peer_cgroup(peer, pid);
    if (!cgroup) {
        why = peer.pidfd >= 0 && !pidfd_alive(peer.pidfd) ? "peer has exited"
                                                          : "cannot read the peer's cgroup";
        return PeerVerdict::Refused;
    }
    if (cgroup_in_session(*cgroup, options_.unit_prefix)) {
        why = "peer runs inside a session (" + *cgroup + ")";
        return PeerVerdict::Refused;
    }
    if (options_.allowed_units.empty()) return PeerVerdict::Allowed;
    const auto verdict = tracker_->check(pid, peer.pidfd, *cgroup, why);
    if (verdict == PeerVerdict::Refused) why += allowed_units_suffix();
    return verdict;
}

bool SystemdBackend::refuses_pid(pid_t pid, std::string& why) const {
    if (options_.allowed_units.empty() || !tracker_->refuses(pid, why)) return false;
    why += allowed_units_suffix();
    return true;
}

std::string SystemdBackend::allowed_units_suffix() const {
    std::string list;
    for (const auto& u : options_.allowed_units) list += (list.empty() ? "" : ", ") + u;
    return " (" + list + ")";
}

void SystemdBackend::recheck(RecheckCallback done) { tracker_->recheck(std::move(done)); }

pid_t SystemdBackend::allowed_unit_main_pid(const std::string& unit) const {
    return tracker_->main_pid(unit);
}

std::unique_ptr<Backend> make_systemd_backend(const BackendOptions& options, std::string& why) {
    if (!options.event) {
        why = "the systemd backend needs an event loop";
        return nullptr;
    }
    for (const auto& u : options.allowed_units)
        if (!is_valid_unit_name(u)) {
            why = "invalid allowed unit name: " + u;
            return nullptr;
        }
    auto conn = BusConnection::open(options.event, why);
    if (!conn) return nullptr;
    auto tracker = std::make_unique<MainPidTracker>(conn, options.allowed_units);
    if (!tracker->load(why)) return nullptr;
    // Start-up: a blocking call is allowed here.
    char* version = nullptr;
    const int r = sd_bus_get_property_string(conn->bus(), kSystemdService, kManagerPath, kManagerInterface,
                                             "Version", nullptr, &version);
    const std::string v = r >= 0 && version ? version : "";
    std::free(version);
    auto backend = std::make_unique<SystemdBackend>(options, std::move(conn), std::move(tracker));
    backend->set_host(probe_host(v));
    log_info("systemd backend: what profiles can have enforced", {{"HOST", describe(backend->host())}});
    return backend;
}

bool systemd_is_running() {
    if (::access("/run/systemd/system", F_OK) != 0) return false;
    sd_bus* raw = nullptr;
    if (sd_bus_open_system(&raw) < 0) return false;
    BusPtr bus(raw);
    sd_bus_set_method_call_timeout(bus.get(), 2'000'000);
    char* version = nullptr;
    const int r = sd_bus_get_property_string(bus.get(), kSystemdService, kManagerPath,
                                             kManagerInterface, "Version", nullptr, &version);
    std::free(version);
    return r >= 0;
}

bool validate_systemd_properties(const std::map<std::string, std::string>& properties,
                                 std::string& why) {
    return validate_properties(properties, why);
}

}  // namespace ptyvisor::backends
