#include "backends/systemd/main_pid_tracker.h"

#include "backends/systemd/session_units.h"
#include "common/linux.h"

namespace ptyvisor::backends::systemd {

MainPidTracker::MainPidTracker(std::shared_ptr<BusConnection> conn, std::vector<std::string> units)
    : conn_(std::move(conn)) {
    for (auto& unit : units) {
        auto e = std::make_unique<Entry>();
        e->owner = this;
        e->path = unit_object_path(unit);
        e->unit = std::move(unit);
        entries_.push_back(std::move(e));
    }
    conn_->add_listener(this);
}

MainPidTracker::~MainPidTracker() { conn_->remove_listener(this); }

void MainPidTracker::add_match(Entry& e) {
    conn_->add_match(e.match,
                     std::string("type='signal',sender='") + kSystemdService + "',path='" + e.path +
                         "',interface='" + kPropertiesInterface + "',member='PropertiesChanged'",
                     &MainPidTracker::on_properties_changed, &e);
}

bool MainPidTracker::load(std::string& why) {
    for (auto& e : entries_) {
        if (!is_valid_unit_name(e->unit) || e->path.empty()) {
            why = "invalid allowed unit name: " + e->unit;
            return false;
        }
        add_match(*e);
    }
    for (auto& e : entries_) {
        BusError error;
        std::uint32_t pid = 0;
        sd_bus_message* raw = nullptr;
        // Reading through the object path loads the unit if needed; a unit that does not
        // exist (yet) reads as MainPID 0 and is picked up by its PropertiesChanged later.
        const int r = sd_bus_get_property(conn_->bus(), kSystemdService, e->path.c_str(),
                                          kServiceInterface, "MainPID", error.get(), &raw, "u");
        MessagePtr reply(raw);
        if (r < 0) {
            if (error.has_name(SD_BUS_ERROR_UNKNOWN_INTERFACE) ||
                error.has_name(SD_BUS_ERROR_UNKNOWN_PROPERTY)) {
                why = "allowed unit " + e->unit + " is not a service";
                return false;
            }
            why = "cannot read MainPID of " + e->unit + ": " +
                  (error.is_set() ? error.message() : describe_errno(r));
            return false;
        }
        if (sd_bus_message_read(reply.get(), "u", &pid) < 0) {
            why = "cannot parse MainPID of " + e->unit;
            return false;
        }
        apply(*e, static_cast<pid_t>(pid));
    }
    return true;
}

void MainPidTracker::request(Entry& e) {
    sd_bus_message* raw = nullptr;
    if (!conn_->bus()) return;
    int r = sd_bus_message_new_method_call(conn_->bus(), &raw, kSystemdService, e.path.c_str(),
                                           kPropertiesInterface, "Get");
    MessagePtr m(raw);
    if (r >= 0) r = sd_bus_message_append(m.get(), "ss", kServiceInterface, "MainPID");
    if (r < 0) return;
    // Replacing the slot drops the earlier request's callback: only the latest reply counts.
    conn_->call_async(e.call, m.get(), &MainPidTracker::on_main_pid, &e);
}

int MainPidTracker::on_properties_changed(sd_bus_message*, void* userdata, sd_bus_error*) {
    auto* e = static_cast<Entry*>(userdata);
    e->owner->request(*e);
    return 0;
}

int MainPidTracker::on_main_pid(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* e = static_cast<Entry*>(userdata);
    if (sd_bus_message_is_method_error(m, nullptr)) return 0;  // kept; re-read on bus_ready
    std::uint32_t pid = 0;
    if (sd_bus_message_read(m, "v", "u", &pid) < 0) return 0;
    e->owner->apply(*e, static_cast<pid_t>(pid));
    return 0;
}

void MainPidTracker::apply(Entry& e, pid_t pid) {
    if (pid == e.pid && e.pidfd && pidfd_alive(e.pidfd.get())) return;
    e.pid = 0;
    e.pidfd.reset();
    if (pid <= 0) return;
    UniqueFd fd(pidfd_open(pid));
    if (!fd) return;
    // The number systemd told us may already belong to another process: take the pidfd
    // only if that process is in the unit's own cgroup, and still alive after we looked.
    const auto cg = read_cgroup(pid);
    if (!cg || cgroup_leaf(*cg) != e.unit || !pidfd_alive(fd.get())) return;
    e.pid = pid;
    e.pidfd = std::move(fd);
}

bool MainPidTracker::is_main_pid(pid_t pid, int peer_pidfd) const {
    if (pid <= 0) return false;
    for (const auto& e : entries_) {
        if (!e->pidfd || e->pid != pid) continue;
        if (!pidfd_alive(e->pidfd.get()) || pidfd_to_pid(e->pidfd.get()) != pid) continue;
        // Both alive and the same number at overlapping times: the same process.
        if (peer_pidfd >= 0 && !pidfd_alive(peer_pidfd)) return false;
        return true;
    }
    return false;
}

pid_t MainPidTracker::main_pid(const std::string& unit) const {
    for (const auto& e : entries_)
        if (e->unit == unit) return e->pidfd && pidfd_alive(e->pidfd.get()) ? e->pid : 0;
    return 0;
}

void MainPidTracker::bus_lost() {
    for (auto& e : entries_) {
        e->match.reset();
        e->call.reset();
    }
}

void MainPidTracker::bus_ready(bool new_bus) {
    for (auto& e : entries_) {
        if (new_bus) add_match(*e);
        request(*e);
    }
}

}  // namespace ptyvisor::backends::systemd
