// MainPidTracker: the MainPID of each allowed unit (e.g. opencode.service), kept current
// without a bus round trip per connection.
//
// For each unit a PropertiesChanged match on its object path is installed first, then the
// MainPID is read (synchronously at construction; start-up only). Every later
// PropertiesChanged on that path triggers an asynchronous re-read; only the reply to the
// latest request is applied, and systemd answers in order, so the cache never goes back to
// an older value even if signals queued up behind the first read.
//
// Each cached MainPID is pinned with a pidfd, opened when the value is learnt and accepted
// only if that process sits in the unit's cgroup and is still alive afterwards. A peer
// matches when its pidfd and the cached pidfd are both alive and name the same PID: two live
// processes cannot share a PID, so a recycled PID can never pass.
//
// The cache lags systemd by one signal and one round trip: a unit's new main process can
// connect before we learn it. Such a peer (in the unit's cgroup while the cached MainPID is
// dead, or a change is unread) is Unsure, not refused; recheck() then reads every MainPID
// afresh. Rechecks are batched into rounds, one round in flight at a time, and rounds start
// at least `min_round_interval` apart: a process that outlives the agent in its unit and
// sends START after START can make us ask systemd a few dozen times a second, not as fast
// as systemd answers. While the cached MainPID is alive and current, any other process of
// the unit is refused at once, without a round trip.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/systemd/bus_connection.h"
#include "backends/systemd/sd_ptr.h"
#include "common/event.h"
#include "common/unique_fd.h"

namespace ptyvisor::backends::systemd {

class MainPidTracker final : private ConnectionListener {
public:
    static constexpr std::chrono::microseconds kMinRoundInterval{20'000};

    MainPidTracker(std::shared_ptr<BusConnection> conn, std::vector<std::string> units,
                   std::chrono::microseconds min_round_interval = kMinRoundInterval);
    ~MainPidTracker();
    MainPidTracker(const MainPidTracker&) = delete;
    MainPidTracker& operator=(const MainPidTracker&) = delete;

    // Installs the matches and reads every MainPID synchronously. Start-up only.
    bool load(std::string& why);

    // Whether the process `pid` (already resolved from the peer's pidfd, whose cgroup is
    // `peer_cgroup`) is the live MainPID of an allowed unit. `peer_pidfd` (or -1) is
    // re-checked for liveness after the compare.
    [[nodiscard]] PeerVerdict check(pid_t pid, int peer_pidfd, const std::string& peer_cgroup,
                                    std::string& why) const;

    // Reads every MainPID again and calls `done` when the round's replies are in.
    void recheck(RecheckCallback done);

    // How many recheck rounds have been sent, for tests.
    [[nodiscard]] std::uint64_t rounds_started() const { return rounds_started_; }

    // The cached MainPID of `unit` (0 when none), for logs and tests.
    [[nodiscard]] pid_t main_pid(const std::string& unit) const;

    // check() would refuse any process numbered `pid`, whatever its cgroup: every allowed
    // unit's MainPID is known, current (no change unread) and alive, and none is `pid`.
    // A live MainPID keeps its number, so no process with another number can be it; and no
    // peer can be Unsure while every MainPID is current. One poll() per allowed unit.
    [[nodiscard]] bool refuses(pid_t pid, std::string& why) const;

    // The unit's org.freedesktop.systemd1.Service properties (a GetAll reply, a{sv}), read at
    // load and again after each PropertiesChanged; nullptr when never read. Sessions copy the
    // agent's sandbox from it (unit_properties.h).
    [[nodiscard]] sd_bus_message* service_properties(const std::string& unit) const;

private:
    struct Entry {
        MainPidTracker* owner = nullptr;
        std::string unit;
        std::string path;
        SlotPtr match;
        SlotPtr call;        // the read a PropertiesChanged asked for
        SlotPtr round_call;  // this entry's read in the current recheck round
        SlotPtr properties_call;
        MessagePtr properties;  // the latest GetAll(Service) reply
        bool change_unread = false;  // a PropertiesChanged whose read has not come back
        pid_t pid = 0;
        UniqueFd pidfd;
    };

    void add_match(Entry& e);
    bool send_get(Entry& e, SlotPtr& slot, sd_bus_message_handler_t callback);
    void request(Entry& e);
    void request_properties(Entry& e);
    static int on_service_properties(sd_bus_message* m, void* userdata, sd_bus_error* error);
    void apply(Entry& e, pid_t pid);
    [[nodiscard]] static bool knows_live_main_pid(const Entry& e);
    void maybe_start_round();
    void start_round();
    void finish_round();

    void bus_lost() override;
    void bus_ready(bool new_bus) override;

    static int on_properties_changed(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int on_main_pid(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int on_round_reply(sd_bus_message* m, void* userdata, sd_bus_error* error);

    std::shared_ptr<BusConnection> conn_;
    std::vector<std::unique_ptr<Entry>> entries_;
    std::vector<RecheckCallback> round_waiters_;  // answered when the round in flight ends
    std::vector<RecheckCallback> next_waiters_;   // asked during a round: they need the next
    std::size_t round_outstanding_ = 0;           // replies the round in flight still awaits
    std::chrono::microseconds min_round_interval_;
    std::uint64_t last_round_usec_ = 0;            // CLOCK_MONOTONIC; 0 before the first
    std::uint64_t rounds_started_ = 0;
    EventSource round_timer_;                      // armed while a round waits for its turn
};

}  // namespace ptyvisor::backends::systemd
