#include "server/session_registry.h"

#include <algorithm>

#include "common/log.h"

namespace ptyvisor::server {

SessionRegistry::~SessionRegistry() = default;

Session& SessionRegistry::create(bool detached) {
    std::string unit = hooks_.new_unit_name();
    auto session = std::make_unique<Session>(context_, *this, unit, detached);
    Session& s = *session;
    s.set_sequence(++created_count_);
    sessions_.emplace(s.id(), std::move(session));
    return s;
}

void SessionRegistry::insert_adopted(std::unique_ptr<Session> session) {
    const std::string id = session->id();
    sessions_.emplace(id, std::move(session));
}

std::vector<Session*> SessionRegistry::all_mutable() const {
    std::vector<Session*> out;
    for (const auto& [id, s] : sessions_) out.push_back(s.get());
    return out;
}

Session* SessionRegistry::find(const std::string& id) const {
    const auto it = sessions_.find(id);
    return it == sessions_.end() ? nullptr : it->second.get();
}

std::vector<const Session*> SessionRegistry::all() const {
    std::vector<const Session*> out;
    for (const auto& [id, s] : sessions_) out.push_back(s.get());
    std::sort(out.begin(), out.end(), [](const Session* a, const Session* b) { return a->sequence() < b->sequence(); });
    return out;
}

std::size_t SessionRegistry::running() const {
    return static_cast<std::size_t>(std::count_if(sessions_.begin(), sessions_.end(), [](const auto& s) {
        return s.second->state() != Session::State::Ended;
    }));
}

void SessionRegistry::client_left(Session* session) { review(session); }

// An ended session goes when nobody reads it and nobody may come back for it.
void SessionRegistry::review(Session* session) {
    if (session->state() != Session::State::Ended) return;
    const std::string id = session->id();
    bound_ended();
    const auto it = sessions_.find(id);
    if (it == sessions_.end() || it->second.get() != session) return;  // it was the oldest
    if (session->clients() > 0) return;
    if (session->detached() && !session->failed_to_start() && !hooks_.shutting_down()) {
        arm_expiry();  // kept for late readers, until its retention has passed
        return;
    }
    doomed_.push_back(std::move(it->second));
    sessions_.erase(it);
    schedule_reap();
}

// Ended sessions are kept while readers are attached and, detached, for their retention; at
// most max_sessions of them at once, whoever reads them. An observer or a WAIT attached to an
// ended session does not keep it past that bound: the oldest go first, and their readers are
// told the session has gone (~Session). Only a controller still taking its EXIT keeps one:
// that lasts until it has read it, or until the operation timeout cuts it off. Counting only
// the unread ones let a reader hold any number of them, each with its log and its screen.
void SessionRegistry::bound_ended() {
    std::vector<Session*> ended;
    for (const auto& [id, s] : sessions_)
        if (s->state() == Session::State::Ended && !s->controller()) ended.push_back(s.get());
    const std::size_t keep = context_.config->limits.max_sessions;
    if (ended.size() <= keep) return;
    std::sort(ended.begin(), ended.end(), [](Session* a, Session* b) { return a->ended_usec() < b->ended_usec(); });
    for (std::size_t i = 0; i + keep < ended.size(); ++i) {
        const auto it = sessions_.find(ended[i]->id());
        doomed_.push_back(std::move(it->second));
        sessions_.erase(it);
    }
    schedule_reap();
    arm_expiry();
}

void SessionRegistry::schedule_reap() {
    if (!reap_source_) {
        add_defer(context_.event, reap_source_, [this] { reap(); });
        describe_source(reap_source_, "session reaper");
    }
    else sd_event_source_set_enabled(reap_source_.get(), SD_EVENT_ONESHOT);
}

void SessionRegistry::reap() {
    doomed_.clear();
    hooks_.sessions_changed();
}

void SessionRegistry::arm_expiry() {
    // One timer, for the session whose retention ends first.
    std::uint64_t first = 0;
    for (const auto& [id, s] : sessions_)
        if (s->state() == Session::State::Ended && s->clients() == 0 && s->detached() &&
            (first == 0 || s->ended_usec() < first))
            first = s->ended_usec();
    if (first == 0) {
        expiry_timer_.reset();
        return;
    }
    const std::uint64_t due = first + to_usec(context_.config->timeouts.retention);
    const std::uint64_t now = now_usec(context_.event);
    // Without the timer, exited sessions stay until another one ends (bounded by max_sessions).
    if (const int r = rearm_timer(context_.event, expiry_timer_, due > now ? due - now : 0, [this] { expire(); }); r < 0)
        log_error_errno(r, "cannot arm the retention timer");
    else
        describe_source(expiry_timer_, "session retention");
}

void SessionRegistry::expire() {
    const std::uint64_t now = now_usec(context_.event);
    const std::uint64_t retention = to_usec(context_.config->timeouts.retention);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        Session& s = *it->second;
        if (s.state() == Session::State::Ended && s.clients() == 0 && now >= s.ended_usec() + retention) {
            doomed_.push_back(std::move(it->second));
            it = sessions_.erase(it);
        } else {
            ++it;
        }
    }
    if (!doomed_.empty()) schedule_reap();
    arm_expiry();
}

void SessionRegistry::shut_down() {
    std::vector<Session*> all;
    for (const auto& [id, s] : sessions_) all.push_back(s.get());
    for (Session* s : all) {
        if (s->state() == Session::State::Ended) review(s);
        else s->stop(protocol::ExitReason::Shutdown);
    }
}

void SessionRegistry::forget_clients() {
    for (const auto& [id, s] : sessions_) s->forget_clients();
    for (const auto& s : doomed_) s->forget_clients();
}


}  // namespace ptyvisor::server
