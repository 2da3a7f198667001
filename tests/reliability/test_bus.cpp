// Scenario 8, forged bus signals (systemd backend, inside the harness).
//
// The agent's account, like any local account, may send a D-Bus signal on the system bus
// addressed to ptyvisord's own connection, with systemd's path, interface and member. Such a
// signal reaches the daemon whatever its match rules say (dbus-daemon checks a match's
// sender only for broadcasts). Here the account sends, with busctl, every signal that would
// end or confuse a live session: its unit "inactive", its start job "failed", its unit
// "removed", systemd "gone". The session must run on and end only when its command does,
// with the command's own status; the daemon logs what it dropped.
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "rel_support.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

bool inside_systemd_harness() {
    struct stat st{};
    return backend() == "systemd" && ::stat("/run/systemd/system", &st) == 0;
}

// The unique name of `pid`'s connection to the system bus, or "" if it has none.
std::string bus_name_of(pid_t pid) {
    sd_bus* raw = nullptr;
    if (sd_bus_open_system(&raw) < 0) return {};
    std::unique_ptr<sd_bus, decltype(&sd_bus_flush_close_unref)> bus(raw, &sd_bus_flush_close_unref);
    sd_bus_message* reply = nullptr;
    if (sd_bus_call_method(bus.get(), "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                           "ListNames", nullptr, &reply, "") < 0)
        return {};
    char** names = nullptr;
    const int r = sd_bus_message_read_strv(reply, &names);
    sd_bus_message_unref(reply);
    if (r < 0) return {};
    std::string found;
    for (char** n = names; n && *n; ++n) {
        std::uint32_t owner = 0;
        sd_bus_message* m = nullptr;
        if (found.empty() && (*n)[0] == ':' &&
            sd_bus_call_method(bus.get(), "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetConnectionUnixProcessID", nullptr, &m, "s", *n) >= 0 &&
            sd_bus_message_read(m, "u", &owner) >= 0 && static_cast<pid_t>(owner) == pid)
            found = *n;
        sd_bus_message_unref(m);
        std::free(*n);
    }
    std::free(static_cast<void*>(names));
    return found;
}

std::string object_path_of(const std::string& unit) {
    char* path = nullptr;
    if (sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit.c_str(), &path) < 0) return {};
    std::string out(path);
    std::free(path);
    return out;
}

class ForgedBusSignals : public EndToEnd {
protected:
    // `busctl emit` as the agent's account: its exit status. The bus by its path in the
    // harness' mount namespace: $DBUS_SYSTEM_BUS_ADDRESS names it under the harness' state
    // directory, which only root may enter.
    int emit_as_account(const std::string& args) const {
        const std::string cmd = "setpriv --reuid=" + std::to_string(account_->uid) +
                                " --regid=" + std::to_string(account_->gid) +
                                " --clear-groups busctl --address=unix:path=/run/dbus/system_bus_socket emit " +
                                args;
        const int st = std::system(cmd.c_str());
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
};

TEST_F(ForgedBusSignals, TheAgentsAccountCannotEndOrConfuseASession) {
    PTYVISOR_NEEDS_SYSTEMD_HARNESS(inside_systemd_harness());
    DaemonProcess* d = start_daemon();
    ASSERT_NE(d, nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    const auto started = start_session(*c, {"sh", "-c", "read line; echo \"got:$line\"; exit 7"});
    ASSERT_TRUE(started);
    const std::string target = bus_name_of(d->pid());
    ASSERT_FALSE(target.empty()) << "the daemon's bus connection was not found";
    const std::string path = object_path_of(started->unit);
    ASSERT_FALSE(path.empty());
    const std::string to = "--destination=" + target + " ";
    const std::string unit = started->unit;

    EXPECT_EQ(emit_as_account(to + path + " org.freedesktop.DBus.Properties PropertiesChanged "
                                          "'sa{sv}as' org.freedesktop.systemd1.Unit 1 ActiveState s inactive 0"),
              0);
    EXPECT_EQ(emit_as_account(to + "/org/freedesktop/systemd1 org.freedesktop.systemd1.Manager JobRemoved "
                                   "uoss 1 /org/freedesktop/systemd1/job/1 " + unit + " failed"),
              0);
    EXPECT_EQ(emit_as_account(to + "/org/freedesktop/systemd1 org.freedesktop.systemd1.Manager UnitRemoved so " +
                              unit + " " + path),
              0);
    EXPECT_EQ(emit_as_account(to + "/org/freedesktop/DBus org.freedesktop.DBus NameOwnerChanged sss "
                                   "org.freedesktop.systemd1 :1.1 ''"),
              0);

    // The forgeries went out before the input: had one been believed, EXIT (with a status
    // the command never had) would come before "got:".
    ASSERT_EQ(c->send_frame(protocol::FrameType::Input, "hello\n"), 0);
    std::string seen;
    const auto exit = c->read_until_exit(Millis(20000), &seen);
    ASSERT_TRUE(exit) << seen;
    EXPECT_NE(c->output().find("got:hello"), std::string::npos) << c->output();
    EXPECT_EQ(exit->kind, protocol::ExitStatus::Kind::Exited);
    EXPECT_EQ(exit->code, 7);
    EXPECT_EQ(protocol::to_string(exit->reason), "exited");
    EXPECT_NE(d->log().find("dropped a signal addressed to the daemon"), std::string::npos) << d->log();

    // And the daemon still serves.
    auto again = connect_as_account();
    ASSERT_NE(again, nullptr);
    ASSERT_TRUE(start_session(*again, {"true"}));
    const auto second = again->read_until_exit(Millis(20000), &seen);
    ASSERT_TRUE(second) << seen;
    EXPECT_EQ(second->code, 0);
}

}  // namespace
}  // namespace ptyvisor::itest
