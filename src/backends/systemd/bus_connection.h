// BusConnection: the backend's one connection to the system bus, shared by the backend, its
// sessions and the allowed-unit tracker, all on the daemon's sd-event loop.
//
// It survives both ways systemd can go away under us:
//  - PID 1 re-executes (daemon-reexec, upgrades): systemd leaves the bus and comes back with a
//    new unique name. Our connection to dbus-daemon stays up, but signals systemd would have
//    sent in the gap are lost. NameOwnerChanged(org.freedesktop.systemd1) with a new owner
//    tells every listener to re-read its state (bus_ready(false)). Subscribe is re-sent.
//  - The bus itself goes away (dbus-daemon restart; or a direct connection to PID 1): sd-bus
//    fails every pending call and synthesises org.freedesktop.DBus.Local.Disconnected. We
//    then reconnect (with back-off), re-Subscribe and tell listeners to drop their slots on
//    the old bus (bus_lost) and re-add matches and re-read state on the new one
//    (bus_ready(true)).
// Only broadcast signals are believed. Any local user may send a signal addressed to our
// connection, with any path, interface and member: dbus-daemon delivers it whatever our
// match rules say, and sd-bus cannot check a match's well-known sender= name itself (it does
// not know who owns the name), so it would reach every match. A broadcast reaches us only
// through a match rule, and for those dbus-daemon checks that the sender owns the rule's
// sender= name. systemd and dbus-daemon broadcast every signal we match, so the connection's
// filter drops any signal that carries a destination before a match sees it.
// Manager.JobRemoved and Manager.UnitRemoved are matched once per connection, before anything
// else is sent, and handed to the listeners; sessions filter them by unit name. (One match
// instead of one per session; sd-bus' local argN matching also proved unreliable for
// JobRemoved, whose first argument is not a string.)
#pragma once

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/systemd/sd_ptr.h"
#include "common/event.h"

namespace ptyvisor::backends::systemd {

inline constexpr const char* kSystemdService = "org.freedesktop.systemd1";
inline constexpr const char* kManagerPath = "/org/freedesktop/systemd1";
inline constexpr const char* kManagerInterface = "org.freedesktop.systemd1.Manager";
inline constexpr const char* kUnitInterface = "org.freedesktop.systemd1.Unit";
inline constexpr const char* kServiceInterface = "org.freedesktop.systemd1.Service";
inline constexpr const char* kPropertiesInterface = "org.freedesktop.DBus.Properties";

class ConnectionListener {
public:
    // The old bus is gone: drop every slot that refers to it.
    virtual void bus_lost() = 0;
    // systemd is reachable (again). `new_bus`: matches must be added again on bus().
    // Either way, state that signals would have told us about must be re-read.
    virtual void bus_ready(bool new_bus) = 0;
    // Manager.JobRemoved / Manager.UnitRemoved, for every unit: listeners filter by name.
    virtual void job_removed(const std::string& /*job*/, const std::string& /*unit*/,
                             const std::string& /*result*/) {}
    virtual void unit_removed(const std::string& /*unit*/) {}

protected:
    ~ConnectionListener() = default;
};

class BusConnection {
public:
    // Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS or the default socket), attaches
    // to `event` and subscribes to systemd's signals. Checks synchronously (start-up only)
    // that systemd answers. nullptr with `why` otherwise.
    static std::shared_ptr<BusConnection> open(sd_event* event, std::string& why);

    ~BusConnection();
    BusConnection(const BusConnection&) = delete;
    BusConnection& operator=(const BusConnection&) = delete;

    [[nodiscard]] sd_bus* bus() const noexcept { return bus_.get(); }
    [[nodiscard]] sd_event* event() const noexcept { return event_.get(); }
    [[nodiscard]] bool connected() const noexcept { return bus_ != nullptr; }

    void add_listener(ConnectionListener* listener);
    void remove_listener(ConnectionListener* listener);

    // A new method call to the systemd Manager, ready for arguments.
    MessagePtr manager_call(const char* member, std::string& why) const;
    // Sends `m` asynchronously; the reply goes to `callback(userdata)` while `slot` lives.
    int call_async(SlotPtr& slot, sd_bus_message* m, sd_bus_message_handler_t callback,
                   void* userdata) const;
    // A method call on the Manager whose reply nobody waits for (UnrefUnit from a destructor,
    // KillUnit). The message goes out on the next loop iteration.
    int fire_and_forget(sd_bus_message* m) const;
    // Installs a match asynchronously. Messages on one connection are handled in order by the
    // bus, so the match is in force for anything we send after this call.
    int add_match(SlotPtr& slot, const std::string& match, sd_bus_message_handler_t callback,
                  void* userdata) const;

private:
    explicit BusConnection(sd_event* event) : event_(sd_event_ref(event)) {}
    bool connect(std::string& why);
    void subscribe();
    void schedule_reconnect();
    void reconnect();
    void notify_ready(bool new_bus);

    // Sees every incoming message before any match does.
    static int on_filter(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static bool is_addressed_signal(sd_bus_message* m);
    void drop_addressed_signal(sd_bus_message* m);
    static int on_owner_changed(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int on_job_removed(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int on_unit_removed(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int on_subscribe_reply(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int on_reconnect(sd_event_source* s, uint64_t usec, void* userdata);

    EventLoop event_;  // first: it outlives the bus attached to it
    BusPtr bus_;
    SlotPtr filter_;
    SlotPtr owner_match_;
    SlotPtr job_removed_match_;
    SlotPtr unit_removed_match_;
    SlotPtr subscribe_call_;
    EventSource reconnect_timer_;
    std::uint64_t retry_usec_ = 0;
    std::uint64_t addressed_signals_dropped_ = 0;
    std::vector<ConnectionListener*> listeners_;
};

// Whether `error` means "systemd or the bus went away" rather than "systemd refused".
bool is_transport_error(const sd_bus_error* error);

}  // namespace ptyvisor::backends::systemd
