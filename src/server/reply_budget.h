// ReplyBudget: how many bytes of one-shot replies (READ's LOG, LIST's SESSIONS, SNAPSHOT's
// SCREEN) the daemon holds for clients that have not read them yet.
//
// A reply is copied into its connection's queue and stays there until the client takes it,
// which a client may delay for as long as it keeps reading a little (the stall timer runs
// from the last byte taken). Without a bound, 600 READs of a 2 MiB log grew the daemon by
// 1.2 GB (docs/security.md, "READ grows the daemon"). So every such reply reserves its size
// here first: at most kPerUid bytes for the connections of one uid (the agent's account,
// an observer, root), and at most kTotal for all. A READ is shortened to what is left (LOG
// says `length`, and the client reads on from offset + length); a reply that finds nothing
// left is refused with ERROR busy. One uid can exhaust only its own share.
//
// Invariant: used() == the sum of every live reservation; release() takes back exactly
// what reserve() granted.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>

namespace ptyvisor::server {

class ReplyBudget {
public:
    static constexpr std::size_t kPerUid = 16u << 20;
    static constexpr std::size_t kTotal = 32u << 20;

    explicit ReplyBudget(std::size_t per_uid = kPerUid, std::size_t total = kTotal)
        : per_uid_(per_uid), total_(total) {}

    // How many of `wanted` bytes `uid` may hold now (0 .. wanted); granted, they count until
    // release().
    std::size_t reserve(uid_t uid, std::size_t wanted);
    // Whether all of `wanted` could be had; reserved only then.
    bool reserve_all(uid_t uid, std::size_t wanted);
    void release(uid_t uid, std::size_t bytes);

    [[nodiscard]] std::size_t used() const { return used_; }
    [[nodiscard]] std::size_t used_by(uid_t uid) const;

private:
    std::size_t per_uid_, total_;
    std::size_t used_ = 0;
    std::map<uid_t, std::size_t> by_uid_;
};

}  // namespace ptyvisor::server
