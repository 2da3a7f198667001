#include "backends/systemd/main_pid_tracker.h"

#include "backends/systemd/session_units.h"
#include "common/linux.h"
#include "common/process.h"

namespace ptyvisor::backends::systemd {

MainPidTracker::MainPidTracker(std::shared_ptr<BusConnection> conn, std::vector<std::string> units,
                               std::chrono::microseconds min_round_interval)
    : conn_(std::move(conn)), min_round_interval_(min_round_interval) {
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
        sd_bus_message* all = nullptr;
        if (sd_bus_call_method(conn_->bus(), kSystemdService, e->path.c_str(), kPropertiesInterface,
                               "GetAll", nullptr, &all, "s", kServiceInterface) >= 0)
            e->properties.reset(all);
    }
    return true;
}

void MainPidTracker::request_properties(Entry& e) {
    if (!conn_->bus()) return;
    sd_bus_message* raw = nullptr;
    int r = sd_bus_message_new_method_call(conn_->bus(), &raw, kSystemdService, e.path.c_str(),
                                           kPropertiesInterface, "GetAll");
    MessagePtr m(raw);
    if (r >= 0) r = sd_bus_message_append(m.get(), "s", kServiceInterface);
    if (r >= 0) conn_->call_async(e.properties_call, m.get(), &MainPidTracker::on_service_properties, &e);
}

int MainPidTracker::on_service_properties(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* e = static_cast<Entry*>(userdata);
    if (sd_bus_message_is_method_error(m, nullptr)) return 0;  // keep the last good one
    e->properties.reset(sd_bus_message_ref(m));
    return 0;
}

sd_bus_message* MainPidTracker::service_properties(const std::string& unit) const {
    for (const auto& e : entries_)
        if (e->unit == unit) return e->properties.get();
    return nullptr;
}

bool MainPidTracker::send_get(Entry& e, SlotPtr& slot, sd_bus_message_handler_t callback) {
    sd_bus_message* raw = nullptr;
    if (!conn_->bus()) return false;
    int r = sd_bus_message_new_method_call(conn_->bus(), &raw, kSystemdService, e.path.c_str(),
                                           kPropertiesInterface, "Get");
    MessagePtr m(raw);
    if (r >= 0) r = sd_bus_message_append(m.get(), "ss", kServiceInterface, "MainPID");
    if (r >= 0) r = conn_->call_async(slot, m.get(), callback, &e);
    return r >= 0;
}

void MainPidTracker::request(Entry& e) {
    // Replacing the slot drops the earlier request's callback: only the latest reply counts.
    send_get(e, e.call, &MainPidTracker::on_main_pid);
}

int MainPidTracker::on_properties_changed(sd_bus_message*, void* userdata, sd_bus_error*) {
    auto* e = static_cast<Entry*>(userdata);
    e->change_unread = true;
    // A restart after daemon-reload may bring a different sandbox. Asked first: systemd
    // answers in order, so no peer is admitted on the new MainPID before it is in.
    e->owner->request_properties(*e);
    e->owner->request(*e);
    return 0;
}

int MainPidTracker::on_main_pid(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* e = static_cast<Entry*>(userdata);
    e->change_unread = false;
    if (sd_bus_message_is_method_error(m, nullptr)) return 0;  // kept; re-read on bus_ready
    std::uint32_t pid = 0;
    if (sd_bus_message_read(m, "v", "u", &pid) < 0) return 0;
    e->owner->apply(*e, static_cast<pid_t>(pid));
    return 0;
}

void MainPidTracker::recheck(RecheckCallback done) {
    next_waiters_.push_back(std::move(done));
    maybe_start_round();
}

void MainPidTracker::maybe_start_round() {
    if (round_outstanding_ > 0 || round_timer_) return;  // the waiters join the next round
    sd_event* event = conn_->event();
    std::uint64_t now = 0;
    sd_event_now(event, CLOCK_MONOTONIC, &now);
    const auto due = last_round_usec_ + static_cast<std::uint64_t>(min_round_interval_.count());
    if (last_round_usec_ == 0 || now >= due) return start_round();
    sd_event_source* s = nullptr;
    const auto on_due = [](sd_event_source*, std::uint64_t, void* self) {
        auto* tracker = static_cast<MainPidTracker*>(self);
        tracker->round_timer_.reset();
        tracker->start_round();
        return 0;
    };
    // Without the timer the waiters would stay until the next recheck; go at once instead.
    if (sd_event_add_time(event, &s, CLOCK_MONOTONIC, due, 1000, on_due, this) < 0) return start_round();
    (void)sd_event_source_set_description(s, "main pid round");
    round_timer_.reset(s);
}

void MainPidTracker::start_round() {
    sd_event_now(conn_->event(), CLOCK_MONOTONIC, &last_round_usec_);
    ++rounds_started_;
    round_waiters_.insert(round_waiters_.end(), std::make_move_iterator(next_waiters_.begin()),
                          std::make_move_iterator(next_waiters_.end()));
    next_waiters_.clear();
    for (auto& e : entries_)
        if (send_get(*e, e->round_call, &MainPidTracker::on_round_reply)) ++round_outstanding_;
    // Nothing could be sent (the bus is away): the waiters stay for bus_ready's round, and
    // their connections' handshake timeout bounds the wait.
}

int MainPidTracker::on_round_reply(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* e = static_cast<Entry*>(userdata);
    MainPidTracker* self = e->owner;
    std::uint32_t pid = 0;
    // systemd answers in order, so this reply is at least as new as any applied before it.
    if (!sd_bus_message_is_method_error(m, nullptr) && sd_bus_message_read(m, "v", "u", &pid) >= 0)
        self->apply(*e, static_cast<pid_t>(pid));
    if (self->round_outstanding_ > 0 && --self->round_outstanding_ == 0) self->finish_round();
    return 0;
}

void MainPidTracker::finish_round() {
    auto done = std::move(round_waiters_);
    round_waiters_.clear();
    if (!next_waiters_.empty()) maybe_start_round();
    for (auto& waiter : done)
        if (const auto call = waiter.lock()) (*call)();
}

void MainPidTracker::apply(Entry& e, pid_t pid) {
    if (pid == e.pid && e.pidfd && pidfd_alive(e.pidfd.get())) return;
    e.pid = 0;
    e.pidfd.reset();
    if (pid <= 0) return;
    // Only a pidfd may vouch for a peer: without pidfd_open (valgrind) no MainPID is known.
    auto process = PidRef::pin(pid);
    if (!process || process->by_pid()) return;
    // The number systemd told us may already belong to another process: take the pidfd
    // only if that process is in the unit's own cgroup (read, then confirmed).
    const auto cg = process->cgroup();
    if (!cg || cgroup_leaf(*cg) != e.unit) return;
    e.pid = pid;
    e.pidfd = std::move(*process).take_pidfd();
}

bool MainPidTracker::knows_live_main_pid(const Entry& e) {
    return e.pidfd && pidfd_alive(e.pidfd.get());
}

PeerVerdict MainPidTracker::check(pid_t pid, int peer_pidfd, const std::string& peer_cgroup,
                                  std::string& why) const {
    if (pid <= 0) {
        why = "peer has exited";
        return PeerVerdict::Refused;
    }
    for (const auto& e : entries_) {
        if (!e->pidfd || e->pid != pid) continue;
        if (!pidfd_alive(e->pidfd.get()) || pidfd_to_pid(e->pidfd.get()) != pid) continue;
        // Both alive and the same number at overlapping times: the same process.
        if (peer_pidfd >= 0 && !pidfd_alive(peer_pidfd)) {
            why = "peer has exited";
            return PeerVerdict::Refused;
        }
        return PeerVerdict::Allowed;
    }
    const std::string leaf(cgroup_leaf(peer_cgroup));
    for (const auto& e : entries_)
        if (leaf == e->unit && (e->change_unread || !knows_live_main_pid(*e))) {
            why = "peer runs in " + e->unit + ", whose main process is not known yet";
            return PeerVerdict::Unsure;
        }
    why = "peer is not the main process of an allowed unit";
    return PeerVerdict::Refused;
}

bool MainPidTracker::refuses(pid_t pid, std::string& why) const {
    if (entries_.empty()) return false;
    for (const auto& e : entries_)
        if (e->pid == pid || e->change_unread || !knows_live_main_pid(*e)) return false;
    why = "peer is not the main process of an allowed unit";
    return true;
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
        e->round_call.reset();
        e->properties_call.reset();
    }
    // The round's replies will never come: its waiters join the round bus_ready starts.
    round_outstanding_ = 0;
    next_waiters_.insert(next_waiters_.begin(), std::make_move_iterator(round_waiters_.begin()),
                         std::make_move_iterator(round_waiters_.end()));
    round_waiters_.clear();
}

void MainPidTracker::bus_ready(bool new_bus) {
    for (auto& e : entries_) {
        if (new_bus) add_match(*e);
        request_properties(*e);
        request(*e);
    }
    if (!next_waiters_.empty() || !round_waiters_.empty()) maybe_start_round();
}

}  // namespace ptyvisor::backends::systemd
