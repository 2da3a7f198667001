#include "backends/systemd/bus_connection.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "common/log.h"

namespace ptyvisor::backends::systemd {
namespace {

constexpr std::uint64_t kRetryMinUsec = 100'000;
constexpr std::uint64_t kRetryMaxUsec = 2'000'000;
constexpr std::uint64_t kStartupCallTimeoutUsec = 10'000'000;

}  // namespace

bool is_transport_error(const sd_bus_error* error) {
    // While dbus-daemon restarts before systemd is back on the bus, a call to
    // org.freedesktop.systemd1 triggers bus activation, which fails with Spawn.* errors.
    if (error && error->name && std::string_view(error->name).rfind("org.freedesktop.DBus.Error.Spawn.", 0) == 0)
        return true;
    return sd_bus_error_has_names(error, SD_BUS_ERROR_NO_REPLY, SD_BUS_ERROR_DISCONNECTED,
                                  SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER,
                                  SD_BUS_ERROR_TIMEOUT, SD_BUS_ERROR_NO_SERVER) != 0;
}

std::shared_ptr<BusConnection> BusConnection::open(sd_event* event, std::string& why) {
    if (!event) {
        why = "no event loop";
        return nullptr;
    }
    std::shared_ptr<BusConnection> conn(new BusConnection(event));
    if (!conn->connect(why)) return nullptr;
    // Start-up only: make sure systemd itself answers, not just the bus.
    BusError error;
    char* version = nullptr;
    const int r = sd_bus_get_property_string(conn->bus(), kSystemdService, kManagerPath,
                                             kManagerInterface, "Version", error.get(), &version);
    std::free(version);
    if (r < 0) {
        why = "systemd does not answer on the system bus: " +
              (error.is_set() ? error.message() : describe_errno(r));
        return nullptr;
    }
    return conn;
}

BusConnection::~BusConnection() {
    filter_.reset();
    owner_match_.reset();
    job_removed_match_.reset();
    unit_removed_match_.reset();
    subscribe_call_.reset();
    reconnect_timer_.reset();
    if (bus_) {
        // Shutdown path: deliver what is queued (UnrefUnit of finished sessions) before closing.
        sd_bus_flush(bus_.get());
        sd_bus_detach_event(bus_.get());
    }
    bus_.reset();
}

bool BusConnection::connect(std::string& why) {
    sd_bus* raw = nullptr;
    int r = sd_bus_open_system(&raw);
    BusPtr bus(raw);
    if (r < 0) {
        why = "cannot connect to the system bus: " + describe_errno(r);
        return false;
    }
    sd_bus_set_exit_on_disconnect(bus.get(), 0);
    sd_bus_set_method_call_timeout(bus.get(), kStartupCallTimeoutUsec);
    // Ahead of every other source. sd-bus dispatches messages it has already read from a
    // timer whose time it sets before every iteration, which makes that timer the newest
    // pending source each time; at equal priority an always-ready source (the listener
    // under a connection flood, a bulk session's PTY) then wins every tie and systemd's
    // replies and signals are never processed. systemd's messages are few; new peers wait.
    r = sd_bus_attach_event(bus.get(), event_.get(), SD_EVENT_PRIORITY_IMPORTANT);
    if (r < 0) {
        why = "cannot attach the bus to the event loop: " + describe_errno(r);
        return false;
    }
    sd_bus_slot* slot = nullptr;
    r = sd_bus_add_filter(bus.get(), &slot, &BusConnection::on_filter, this);
    SlotPtr filter(slot);
    if (r < 0) {
        why = "cannot add a bus filter: " + describe_errno(r);
        return false;
    }
    slot = nullptr;
    r = sd_bus_add_match_async(
        bus.get(), &slot,
        "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
        "interface='org.freedesktop.DBus',member='NameOwnerChanged',"
        "arg0='org.freedesktop.systemd1'",
        &BusConnection::on_owner_changed, nullptr, this);
    SlotPtr owner(slot);
    if (r < 0) {
        why = "cannot watch systemd's bus name: " + describe_errno(r);
        return false;
    }
    const std::string manager = std::string("type='signal',sender='") + kSystemdService +
                                "',path='" + kManagerPath + "',interface='" + kManagerInterface + "',";
    slot = nullptr;
    r = sd_bus_add_match_async(bus.get(), &slot, (manager + "member='JobRemoved'").c_str(),
                               &BusConnection::on_job_removed, nullptr, this);
    SlotPtr jobs(slot);
    slot = nullptr;
    if (r >= 0)
        r = sd_bus_add_match_async(bus.get(), &slot, (manager + "member='UnitRemoved'").c_str(),
                                   &BusConnection::on_unit_removed, nullptr, this);
    SlotPtr units(slot);
    if (r < 0) {
        why = "cannot watch systemd's jobs: " + describe_errno(r);
        return false;
    }
    bus_ = std::move(bus);
    filter_ = std::move(filter);
    owner_match_ = std::move(owner);
    job_removed_match_ = std::move(jobs);
    unit_removed_match_ = std::move(units);
    subscribe();
    return true;
}

void BusConnection::subscribe() {
    std::string why;
    MessagePtr m = manager_call("Subscribe", why);
    if (!m) return;
    call_async(subscribe_call_, m.get(), &BusConnection::on_subscribe_reply, this);
}

int BusConnection::on_subscribe_reply(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<BusConnection*>(userdata);
    self->subscribe_call_.reset();
    // "Client is already subscribed" after a re-execution is fine; systemd keeps subscribers.
    (void)m;
    return 0;
}

void BusConnection::add_listener(ConnectionListener* listener) { listeners_.push_back(listener); }

void BusConnection::remove_listener(ConnectionListener* listener) {
    listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), listener), listeners_.end());
}

MessagePtr BusConnection::manager_call(const char* member, std::string& why) const {
    if (!bus_) {
        why = "not connected to the system bus";
        return nullptr;
    }
    sd_bus_message* raw = nullptr;
    const int r = sd_bus_message_new_method_call(bus_.get(), &raw, kSystemdService, kManagerPath,
                                                 kManagerInterface, member);
    MessagePtr m(raw);
    if (r < 0) {
        why = std::string("cannot create ") + member + " call: " + describe_errno(r);
        return nullptr;
    }
    return m;
}

int BusConnection::call_async(SlotPtr& slot, sd_bus_message* m, sd_bus_message_handler_t callback,
                              void* userdata) const {
    if (!bus_) return -ENOTCONN;
    sd_bus_slot* raw = nullptr;
    const int r = sd_bus_call_async(bus_.get(), &raw, m, callback, userdata, 0);
    slot.reset(raw);
    return r;
}

int BusConnection::fire_and_forget(sd_bus_message* m) const {
    if (!bus_) return -ENOTCONN;
    // NULL slot: a floating call, with no callback and no userdata that could dangle.
    return sd_bus_call_async(bus_.get(), nullptr, m, nullptr, nullptr, 0);
}

int BusConnection::add_match(SlotPtr& slot, const std::string& match,
                             sd_bus_message_handler_t callback, void* userdata) const {
    if (!bus_) return -ENOTCONN;
    sd_bus_slot* raw = nullptr;
    const int r = sd_bus_add_match_async(bus_.get(), &raw, match.c_str(), callback, nullptr, userdata);
    slot.reset(raw);
    return r;
}

int BusConnection::on_filter(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<BusConnection*>(userdata);
    if (is_addressed_signal(m)) {
        self->drop_addressed_signal(m);
        return 1;  // handled: no match sees it
    }
    if (sd_bus_message_is_signal(m, "org.freedesktop.DBus.Local", "Disconnected") > 0)
        self->schedule_reconnect();
    return 0;
}

bool BusConnection::is_addressed_signal(sd_bus_message* m) {
    if (sd_bus_message_is_signal(m, nullptr, nullptr) <= 0 || !sd_bus_message_get_destination(m)) return false;
    // The bus driver's own (NameAcquired at Hello): dbus-daemon sets every sender, and no
    // client can have this one.
    const char* sender = sd_bus_message_get_sender(m);
    return !sender || std::string_view(sender) != "org.freedesktop.DBus";
}

void BusConnection::drop_addressed_signal(sd_bus_message* m) {
    // Logged at 1, 2, 4, 8, ...: a flood of them must not flood the journal.
    ++addressed_signals_dropped_;
    if ((addressed_signals_dropped_ & (addressed_signals_dropped_ - 1)) != 0) return;
    const char* sender = sd_bus_message_get_sender(m);
    const char* interface = sd_bus_message_get_interface(m);
    const char* member = sd_bus_message_get_member(m);
    log_warning("dropped a signal addressed to the daemon: systemd and the bus broadcast theirs",
                {{"SENDER", sender ? sender : "?"},
                 {"SIGNAL", std::string(interface ? interface : "?") + "." + (member ? member : "?")},
                 {"DROPPED_TOTAL", std::to_string(addressed_signals_dropped_)}});
}

int BusConnection::on_owner_changed(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<BusConnection*>(userdata);
    const char* name = nullptr;
    const char* old_owner = nullptr;
    const char* new_owner = nullptr;
    if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0) return 0;
    if (new_owner && *new_owner) {
        // systemd is back (after daemon-reexec). It keeps its subscribers across the
        // re-execution, but subscribing again is harmless and covers a real restart.
        self->subscribe();
        self->notify_ready(false);
    }
    return 0;
}

int BusConnection::on_job_removed(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<BusConnection*>(userdata);
    std::uint32_t id = 0;
    const char *job = nullptr, *unit = nullptr, *result = nullptr;
    if (sd_bus_message_read(m, "uoss", &id, &job, &unit, &result) < 0 || !job || !unit || !result)
        return 0;
    const std::string j(job), u(unit), res(result);
    const auto snapshot = self->listeners_;
    for (auto* l : snapshot)
        if (std::find(self->listeners_.begin(), self->listeners_.end(), l) != self->listeners_.end())
            l->job_removed(j, u, res);
    return 0;
}

int BusConnection::on_unit_removed(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<BusConnection*>(userdata);
    const char *unit = nullptr, *path = nullptr;
    if (sd_bus_message_read(m, "so", &unit, &path) < 0 || !unit) return 0;
    const std::string u(unit);
    const auto snapshot = self->listeners_;
    for (auto* l : snapshot)
        if (std::find(self->listeners_.begin(), self->listeners_.end(), l) != self->listeners_.end())
            l->unit_removed(u);
    return 0;
}

void BusConnection::notify_ready(bool new_bus) {
    // A listener may remove itself or others while we iterate.
    const auto snapshot = listeners_;
    for (auto* l : snapshot)
        if (std::find(listeners_.begin(), listeners_.end(), l) != listeners_.end()) l->bus_ready(new_bus);
}

void BusConnection::schedule_reconnect() {
    if (reconnect_timer_) return;
    // Never tear the bus down from inside its own dispatch: do it from a timer.
    retry_usec_ = 0;
    sd_event_source* s = nullptr;
    if (sd_event_add_time_relative(event_.get(), &s, CLOCK_MONOTONIC, 0, 0, &BusConnection::on_reconnect,
                                   this) >= 0) {
        (void)sd_event_source_set_description(s, "bus reconnect");
        reconnect_timer_.reset(s);
    }
}

int BusConnection::on_reconnect(sd_event_source*, uint64_t, void* userdata) {
    auto* self = static_cast<BusConnection*>(userdata);
    self->reconnect();
    return 0;
}

void BusConnection::reconnect() {
    if (bus_) {
        const auto snapshot = listeners_;
        for (auto* l : snapshot)
            if (std::find(listeners_.begin(), listeners_.end(), l) != listeners_.end()) l->bus_lost();
        filter_.reset();
        owner_match_.reset();
        job_removed_match_.reset();
        unit_removed_match_.reset();
        subscribe_call_.reset();
        sd_bus_detach_event(bus_.get());
        bus_.reset();
    }
    std::string why;
    if (connect(why)) {
        reconnect_timer_.reset();
        retry_usec_ = 0;
        notify_ready(true);
        return;
    }
    retry_usec_ = std::clamp(retry_usec_ * 2, kRetryMinUsec, kRetryMaxUsec);
    sd_event_source_set_time_relative(reconnect_timer_.get(), retry_usec_);
    sd_event_source_set_enabled(reconnect_timer_.get(), SD_EVENT_ONESHOT);
}

}  // namespace ptyvisor::backends::systemd
