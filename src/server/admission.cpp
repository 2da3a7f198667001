#include "server/admission.h"

#include <algorithm>

namespace ptyvisor::server {

Admission::Handshake Admission::enter_handshake(pid_t peer) {
    auto& held = handshakes_by_peer_[peer];
    if (held >= limits_.max_unauthenticated_per_peer) {
        if (held == 0) handshakes_by_peer_.erase(peer);
        return Handshake::Refused;
    }
    if (handshakes_ >= limits_.max_unauthenticated) {
        // Evict only from a peer holding more than this one will after admission: a fair
        // share can never be taken away by a newcomer.
        const pid_t victim = evict_candidate();
        if (victim == 0 || handshakes_by_peer_[victim] <= held + 1) {
            if (held == 0) handshakes_by_peer_.erase(peer);
            return Handshake::Refused;
        }
        ++held;
        ++handshakes_;
        return Handshake::AdmittedEvicting;
    }
    ++held;
    ++handshakes_;
    return Handshake::Admitted;
}

void Admission::leave_handshake(pid_t peer) {
    const auto it = handshakes_by_peer_.find(peer);
    if (it == handshakes_by_peer_.end() || it->second == 0) return;
    --handshakes_;
    if (--it->second == 0) handshakes_by_peer_.erase(it);
}

bool Admission::holds_all_its_handshakes(pid_t peer) const {
    const auto it = handshakes_by_peer_.find(peer);
    return it != handshakes_by_peer_.end() && it->second >= limits_.max_unauthenticated_per_peer;
}

pid_t Admission::evict_candidate() const {
    pid_t victim = 0;
    std::uint32_t most = 0;
    for (const auto& [pid, n] : handshakes_by_peer_)
        if (n > most) most = n, victim = pid;
    return victim;
}

bool Admission::reserve_session() {
    if (sessions_ >= limits_.max_sessions) return false;
    ++sessions_;
    return true;
}

void Admission::release_session() {
    if (sessions_ > 0) --sessions_;
}

bool Admission::take_admission(std::uint64_t now_usec) {
    const double capacity = limits_.admissions_per_minute;
    if (last_refill_usec_ != 0 && now_usec > last_refill_usec_)
        tokens_ = std::min(capacity, tokens_ + capacity * static_cast<double>(now_usec - last_refill_usec_) / 60e6);
    last_refill_usec_ = now_usec;
    if (tokens_ < 1.0) {
        ++counters_.rate_limited;
        return false;
    }
    tokens_ -= 1.0;
    return true;
}

void Admission::count_rejected(protocol::ErrorCode code) { ++counters_.rejected[std::string(protocol::to_string(code))]; }

void Admission::count_start(std::optional<protocol::ErrorCode> refused) {
    ++counters_.starts[refused ? std::string(protocol::to_string(*refused)) : "started"];
}

void Admission::count_ended(std::string_view reason, std::uint64_t bytes_in, std::uint64_t bytes_out) {
    ++counters_.ended[std::string(reason)];
    counters_.ended_bytes_in += bytes_in;
    counters_.ended_bytes_out += bytes_out;
}

}  // namespace ptyvisor::server
