#include "server/reply_budget.h"

#include <algorithm>

namespace ptyvisor::server {

std::size_t ReplyBudget::reserve(uid_t uid, std::size_t wanted) {
    const std::size_t mine = used_by(uid);
    const std::size_t room = std::min(per_uid_ - std::min(per_uid_, mine), total_ - std::min(total_, used_));
    const std::size_t granted = std::min(room, wanted);
    if (granted == 0) return 0;
    by_uid_[uid] = mine + granted;
    used_ += granted;
    return granted;
}

bool ReplyBudget::reserve_all(uid_t uid, std::size_t wanted) {
    const std::size_t mine = used_by(uid);
    if (mine + wanted > per_uid_ || used_ + wanted > total_) return false;
    if (wanted == 0) return true;
    by_uid_[uid] = mine + wanted;
    used_ += wanted;
    return true;
}

void ReplyBudget::release(uid_t uid, std::size_t bytes) {
    const auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    const std::size_t taken = std::min(bytes, it->second);
    it->second -= taken;
    used_ -= taken;
    if (it->second == 0) by_uid_.erase(it);
}

std::size_t ReplyBudget::used_by(uid_t uid) const {
    const auto it = by_uid_.find(uid);
    return it == by_uid_.end() ? 0 : it->second;
}

}  // namespace ptyvisor::server
