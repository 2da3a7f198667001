// The systemd backend: each session is a transient service started over D-Bus (sd-bus),
// followed by signals on the daemon's one sd-event loop.
//
// Lifetime: the backend and its sessions share one BusConnection; sessions may outlive the
// backend object, never the event loop.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "backends/backend.h"

namespace ptyvisor::backends {

namespace systemd {
class BusConnection;
class MainPidTracker;
struct HostEnforcement;
}  // namespace systemd

class SystemdBackend final : public Backend {
public:
    // Use make_systemd_backend().
    SystemdBackend(BackendOptions options, std::shared_ptr<systemd::BusConnection> conn,
                   std::unique_ptr<systemd::MainPidTracker> tracker);
    ~SystemdBackend() override;
    SystemdBackend(const SystemdBackend&) = delete;
    SystemdBackend& operator=(const SystemdBackend&) = delete;

    [[nodiscard]] std::string_view name() const override { return "systemd"; }
    bool cleanup_orphans(Clock::time_point deadline, std::string& why) override;
    // Resolves the working directory's path and the command's executable (both sent to
    // systemd by name) as the agent.
    [[nodiscard]] Resolver resolver() const override;
    std::unique_ptr<SessionProcesses> start(SessionSpec spec, SessionEvents events, std::string& why) override;
    [[nodiscard]] bool can_adopt() const override { return true; }
    std::unique_ptr<SessionProcesses> adopt(const Adoption& spec, SessionEvents events, std::string& why) override;
    PeerVerdict check_peer(const Peer& peer, std::string& why) override;
    bool refuses_pid(pid_t pid, std::string& why) const override;
    void recheck(RecheckCallback done) override;
    // Refuses what this host's systemd would accept and not enforce (host_enforcement.h).
    bool check_profile(const SandboxProfile& profile, std::string& why) const override;
    // What was probed at start-up; for logs and tests.
    [[nodiscard]] const systemd::HostEnforcement& host() const { return *host_; }
    void set_host(systemd::HostEnforcement host);

    // The cached MainPID of an allowed unit (0 when none); for logs and tests.
    [[nodiscard]] pid_t allowed_unit_main_pid(const std::string& unit) const;

private:
    std::string allowed_units_suffix() const;
    BackendOptions options_;
    std::set<std::string> adopted_;  // units cleanup_orphans() leaves alone
    std::shared_ptr<systemd::BusConnection> conn_;
    std::unique_ptr<systemd::MainPidTracker> tracker_;
    std::shared_ptr<const systemd::HostEnforcement> host_;
};

// Connects to the system bus on options.event and checks that systemd answers; loads the
// MainPIDs of options.allowed_units. nullptr with `why` when any of that fails.
std::unique_ptr<Backend> make_systemd_backend(const BackendOptions& options, std::string& why);

// True when systemd is PID 1 of our namespace (/run/systemd/system exists) and answers on the
// system bus: the `auto` backend choice. Blocks briefly; start-up only.
bool systemd_is_running();

// Whether configured unit properties (MemoryMax, TasksMax, CPUQuota, RuntimeMaxSec,
// NoNewPrivileges, PrivateTmp, ProtectSystem, ProtectHome, LimitCORE, ...) are supported and
// valid, for checking the configuration at load time. False with a message naming the
// offending property.
bool validate_systemd_properties(const std::map<std::string, std::string>& properties,
                                 std::string& why);

}  // namespace ptyvisor::backends
