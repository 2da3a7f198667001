// Admission: who may hold what, decided before a connection costs anything.
//
// A quota charged before authentication would let any same-uid process lock the agent out,
// so nothing is charged until the peer is known. Here (docs/admission.md has the whole design):
//  - authentication happens at accept time, from what the kernel already knows (SO_PEERCRED,
//    SO_PEERPIDFD, the peer's cgroup); a peer that fails holds nothing;
//  - a handshake slot is per peer process: one process holds at most
//    max_unauthenticated_per_peer, and when all slots are taken a newcomer evicts the oldest
//    handshake of the process holding the most, so no flood can keep a fresh peer out;
//  - the admission rate is charged only for a valid START from an authenticated peer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/error_code.h"
#include "server/config.h"

namespace ptyvisor::server {

struct AdmissionCounters {
    std::uint64_t accepted = 0;
    std::uint64_t rate_limited = 0;
    std::uint64_t handshake_timeouts = 0;
    std::uint64_t evicted = 0;
    std::uint64_t hung_up = 0;  // dropped at accept: the peer had closed (server.cpp, accept_one)
    std::uint64_t quarantined = 0;  // sessions whose processes outlived their cleanup (session.cpp)
    std::map<std::string, std::uint64_t> rejected;  // by error code name
    // For metrics (STATUS). STARTs by result: "started", or the code that refused one.
    std::map<std::string, std::uint64_t> starts;
    // Sessions ended, by ExitReason name, and the bytes they relayed (live sessions' bytes
    // are read from them: the two add up to the daemon's life).
    std::map<std::string, std::uint64_t> ended;
    std::uint64_t ended_bytes_in = 0;
    std::uint64_t ended_bytes_out = 0;
    // STARTs that waited for the backend's recheck of their peer, and for how long in all.
    std::uint64_t admission_waits = 0;
    std::uint64_t admission_wait_usec = 0;
};

class Admission {
public:
    explicit Admission(const Limits& limits) : limits_(limits), tokens_(limits.admissions_per_minute) {}

    enum class Handshake { Admitted, AdmittedEvicting, Refused };
    // Whether `peer` may start a handshake. AdmittedEvicting: the caller must first evict
    // the oldest handshake of evict_candidate() (which calls leave_handshake for it).
    Handshake enter_handshake(pid_t peer);
    void leave_handshake(pid_t peer);
    // Whether `peer` holds every handshake one process may: enter_handshake() would refuse
    // it whatever else is true of it, so the listener refuses it before pinning it or
    // reading its cgroup (the cheapest refusal, for a flood from few processes).
    [[nodiscard]] bool holds_all_its_handshakes(pid_t peer) const;
    [[nodiscard]] pid_t evict_candidate() const;

    // One of max_sessions; false when all are taken.
    bool reserve_session();
    void release_session();
    [[nodiscard]] std::uint32_t sessions() const { return sessions_; }

    // Token bucket of admissions_per_minute, refilled continuously. `now_usec` is monotonic.
    bool take_admission(std::uint64_t now_usec);

    void count_rejected(protocol::ErrorCode code);
    // A START's result: started (nullopt) or refused with `code`.
    void count_start(std::optional<protocol::ErrorCode> refused);
    // A session that had started ended, having relayed these bytes.
    void count_ended(std::string_view reason, std::uint64_t bytes_in, std::uint64_t bytes_out);
    AdmissionCounters& counters() { return counters_; }
    [[nodiscard]] const AdmissionCounters& counters() const { return counters_; }

private:
    Limits limits_;
    std::map<pid_t, std::uint32_t> handshakes_by_peer_;
    std::uint32_t handshakes_ = 0;
    std::uint32_t sessions_ = 0;
    double tokens_;
    std::uint64_t last_refill_usec_ = 0;
    AdmissionCounters counters_;
};

}  // namespace ptyvisor::server
