#include "cli/mcp/session_subscriptions.h"

#include <algorithm>
#include <exception>

#include "cli/mcp/session_resources.h"
#include "cli/mcp/tool_replies.h"

namespace ptyvisor::cli::mcp {
namespace {

using Clock = std::chrono::steady_clock;
using protocol::ErrorCode;
using protocol::FrameType;

// LIST exists since version 2 and its entries carry version 4's members in every version:
// asked in version 2, it works with any daemon that has sessions to list.
constexpr std::uint8_t kListVersion = 2;
// COMMANDS and WATCH are version 4's.
constexpr std::uint8_t kCommandsVersion = 4;

std::string refusal_text(const protocol::ErrorReply& e) {
    if (e.code == ErrorCode::UnsupportedVersion)
        return "ptyvisord does not speak protocol version 4, which session resources and their "
               "subscriptions need: upgrade ptyvisord (" + e.message + ")";
    return error_text(e);
}

ResourceReply refused(const protocol::ErrorReply& e, const std::string& id) {
    if (e.code == ErrorCode::NoSuchSession)
        return ResourceReply::error(kResourceNotFound, "Resource not found: " + session_uri(id) + " (" + e.message + ")");
    return ResourceReply::error(kResourceInternalError, refusal_text(e));
}

}  // namespace

SessionSubscriptions::SessionSubscriptions(std::string socket_path, Complete complete, Updated updated)
    : socket_path_(std::move(socket_path)), complete_(std::move(complete)), updated_(std::move(updated)) {}

bool SessionSubscriptions::open_stream(std::uint64_t call, Role role, const std::string& id, std::string& why) {
    Stream s;
    s.role = role;
    s.call = call;
    s.id = id;
    s.deadline = Clock::now() + kReplyTimeout;
    const bool ok = role == Role::List
                        ? s.stream.open(socket_path_, FrameType::List, {}, kListVersion, why)
                    : role == Role::Commands
                        ? s.stream.open(socket_path_, FrameType::Commands, protocol::encode(protocol::CommandsRequest{id, 0}),
                                        kCommandsVersion, why)
                        : s.stream.open(socket_path_, FrameType::Watch, protocol::encode(protocol::WatchRequest{id}),
                                        kCommandsVersion, why);
    if (!ok) return false;
    const std::uint64_t key = next_stream_++;
    if (role == Role::Watch) requests_.at(call).watch = key;
    streams_.emplace(key, std::move(s));
    return true;
}

void SessionSubscriptions::fail_at_once(std::uint64_t call, const std::string& why) {
    answer(call, ResourceReply::error(kResourceInternalError, "cannot reach ptyvisord: " + why));
}

void SessionSubscriptions::start_request(std::uint64_t call, Kind kind, const std::string& id) {
    Request& r = requests_[call];
    r.kind = kind;
    r.id = id;
}

void SessionSubscriptions::list(std::uint64_t call) {
    start_request(call, Kind::List, {});
    if (std::string why; !open_stream(call, Role::List, {}, why)) fail_at_once(call, why);
}

void SessionSubscriptions::read(std::uint64_t call, const std::string& id) {
    start_request(call, Kind::Read, id);
    std::string why;
    if (!open_stream(call, Role::List, {}, why) || !open_stream(call, Role::Commands, id, why)) fail_at_once(call, why);
}

std::size_t SessionSubscriptions::subscribes_pending() const {
    return static_cast<std::size_t>(
        std::count_if(requests_.begin(), requests_.end(), [](const auto& r) { return r.second.kind == Kind::Subscribe; }));
}

void SessionSubscriptions::subscribe(std::uint64_t call, const std::string& id) {
    if (watches_.contains(id)) return complete_(call, ResourceReply::ok(nlohmann::json::object()));
    if (watches_.size() + subscribes_pending() >= kMaxSubscriptions)
        return complete_(call, ResourceReply::error(kResourceInvalidParams,
                                                    "Too many subscriptions (" + std::to_string(kMaxSubscriptions) +
                                                        "): unsubscribe from one first"));
    start_request(call, Kind::Subscribe, id);
    // The WATCH first, then the probe: once the probe is answered, the daemon has the WATCH.
    std::string why;
    if (!open_stream(call, Role::Watch, id, why) || !open_stream(call, Role::Commands, id, why)) fail_at_once(call, why);
}

void SessionSubscriptions::unsubscribe(std::uint64_t call, const std::string& id) {
    if (const auto it = watches_.find(id); it != watches_.end()) {
        streams_.erase(it->second);
        watches_.erase(it);
    }
    std::vector<std::uint64_t> pending;
    for (const auto& [key, r] : requests_)
        if (r.kind == Kind::Subscribe && r.id == id) pending.push_back(key);
    for (const auto key : pending)
        answer(key, ResourceReply::error(kResourceInvalidParams, "unsubscribed before the subscription was made"));
    complete_(call, ResourceReply::ok(nlohmann::json::object()));
}

void SessionSubscriptions::cancel(std::uint64_t call) {
    if (!requests_.erase(call)) return;
    std::erase_if(streams_, [call](const auto& s) { return s.second.call == call; });
}

void SessionSubscriptions::answer(std::uint64_t call, const ResourceReply& reply) {
    if (!requests_.erase(call)) return;
    std::erase_if(streams_, [call](const auto& s) { return s.second.call == call; });
    complete_(call, reply);
}

void SessionSubscriptions::collect(std::vector<pollfd>& fds, std::vector<std::uint64_t>& owners) const {
    for (const auto& [key, s] : streams_) {
        fds.push_back({s.stream.fd(), s.stream.events(), 0});
        owners.push_back(key);
    }
}

int SessionSubscriptions::poll_timeout_ms() const {
    auto nearest = Clock::time_point::max();
    for (const auto& [key, s] : streams_) nearest = std::min(nearest, s.deadline);
    if (nearest == Clock::time_point::max()) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(nearest - Clock::now()).count() + 1;
    return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

void SessionSubscriptions::dispatch(const std::vector<pollfd>& fds, std::size_t first,
                                    const std::vector<std::uint64_t>& owners) {
    for (std::size_t i = 0; i < owners.size(); ++i) {
        if (fds[first + i].revents == 0 || !streams_.contains(owners[i])) continue;
        try {
            service(owners[i], fds[first + i].revents);
        } catch (const std::exception& e) {
            stream_finished(owners[i], std::string("internal error: ") + e.what());
        }
    }
    const auto now = Clock::now();
    std::vector<std::uint64_t> expired;
    for (const auto& [key, s] : streams_)
        if (now >= s.deadline) expired.push_back(key);
    for (const auto key : expired) stream_finished(key, "ptyvisord did not answer in time");
}

void SessionSubscriptions::service(std::uint64_t key, short revents) {
    Stream& s = streams_.at(key);
    std::vector<protocol::Frame> frames;
    std::string why;
    if (!s.stream.service(revents, frames, why)) return stream_finished(key, "connection to ptyvisord failed: " + why);
    for (auto& frame : frames) {
        bool done = false;
        handle_frame(key, s, frame, done);
        if (done) return;  // the stream is gone
    }
    if (s.stream.closed()) stream_finished(key, "ptyvisord closed the connection without an answer");
}

void SessionSubscriptions::handle_frame(std::uint64_t key, Stream& s, protocol::Frame& frame, bool& done) {
    const std::uint64_t call = s.call;
    Request* r = requests_.contains(call) ? &requests_.at(call) : nullptr;
    const auto finish = [&](const std::optional<std::string>& failure) {
        done = true;
        stream_finished(key, failure);
    };
    if (frame.type == FrameType::Error) {
        auto e = protocol::decode_error(frame.text());
        if (!e) return finish("bad ERROR from ptyvisord: " + e.error);
        if (r != nullptr && s.role == Role::List) r->list_refused = *e.value;
        if (r != nullptr && s.role == Role::Commands) r->commands_refused = *e.value;
        if (r != nullptr && s.role == Role::Watch) r->watch_failure = refusal_text(*e.value);
        return finish(std::nullopt);
    }
    if (s.role == Role::List && frame.type == FrameType::Sessions) {
        auto d = protocol::decode_sessions(frame.text());
        if (!d) return finish("bad SESSIONS from ptyvisord: " + d.error);
        if (r != nullptr) r->sessions = std::move(*d.value);
        return finish(std::nullopt);
    }
    if (s.role == Role::Commands && frame.type == FrameType::CommandList) {
        auto d = protocol::decode_command_list(frame.text());
        if (!d) return finish("bad COMMAND_LIST from ptyvisord: " + d.error);
        if (r != nullptr) r->commands = std::move(*d.value);
        return finish(std::nullopt);
    }
    if (s.role == Role::Watch && frame.type == FrameType::Event) {
        auto d = protocol::decode_event(frame.text());
        if (!d) return finish("bad EVENT from ptyvisord: " + d.error);
        const auto kind = d.value->kind;
        if (kind != protocol::SessionEvent::Kind::Exit) {
            if (call == 0 && notifies(kind)) updated_(session_uri(s.id), protocol::to_string(kind));
            return;
        }
        // The last frame. Before confirmation, the session had already exited: nothing will change.
        if (call == 0) {
            const std::string id = s.id;
            done = true;
            streams_.erase(key);
            return watch_ended(id, protocol::to_string(kind));
        }
        if (r != nullptr) r->watch = 0;
        done = true;
        streams_.erase(key);
        return;
    }
    finish("ptyvisord sent an unexpected " + std::string(protocol::to_string(frame.type)) + " frame");
}

void SessionSubscriptions::watch_ended(const std::string& id, std::string_view event) {
    if (const auto it = watches_.find(id); it != watches_.end()) {
        streams_.erase(it->second);
        watches_.erase(it);
    }
    updated_(session_uri(id), event);
}

void SessionSubscriptions::stream_finished(std::uint64_t key, const std::optional<std::string>& failure) {
    const auto it = streams_.find(key);
    if (it == streams_.end()) return;
    const Role role = it->second.role;
    const std::uint64_t call = it->second.call;
    const std::string id = it->second.id;
    streams_.erase(it);
    if (role == Role::Watch && call == 0) return watch_ended(id, "watch_ended");
    const auto r = requests_.find(call);
    if (r == requests_.end()) return;
    Request& request = r->second;
    if (role == Role::List) request.list_done = true;
    if (role == Role::Commands) request.commands_done = true;
    if (role == Role::Watch) {
        request.watch = 0;
        if (failure && !request.watch_failure) request.watch_failure = *failure;
    } else if (failure && !request.failure) {
        request.failure = *failure;
    }
    check(call);
}

void SessionSubscriptions::check(std::uint64_t call) {
    const auto it = requests_.find(call);
    if (it == requests_.end()) return;
    const Request& r = it->second;
    const auto failed = [&](const std::string& why) {
        answer(call, ResourceReply::error(kResourceInternalError, why));
    };
    switch (r.kind) {
        case Kind::List:
            if (!r.list_done) return;
            if (r.sessions) return answer(call, ResourceReply::ok(session_resource_list(*r.sessions)));
            if (r.list_refused) return answer(call, refused(*r.list_refused, {}));
            return failed(r.failure.value_or("no answer from ptyvisord"));
        case Kind::Read: {
            if (!r.list_done || !r.commands_done) return;
            if (!r.sessions) {
                if (r.list_refused) return answer(call, refused(*r.list_refused, r.id));
                return failed(r.failure.value_or("no answer from ptyvisord"));
            }
            const auto info = std::find_if(r.sessions->begin(), r.sessions->end(),
                                           [&](const auto& s) { return s.id == r.id; });
            if (info == r.sessions->end())
                return answer(call, ResourceReply::error(kResourceNotFound,
                                                         "Resource not found: " + session_uri(r.id) +
                                                             " (no such session, or it has been removed)"));
            // Without COMMANDS (an older daemon), the resource is LIST's part of it.
            return answer(call, ResourceReply::ok(session_resource_contents(*info, r.commands)));
        }
        case Kind::Subscribe: {
            if (!r.commands_done) return;
            if (r.commands_refused) return answer(call, refused(*r.commands_refused, r.id));
            if (!r.commands) return failed(r.failure.value_or("no answer from ptyvisord"));
            if (r.watch_failure) return failed("cannot watch " + session_uri(r.id) + ": " + *r.watch_failure);
            const std::uint64_t watch = r.watch;
            const std::string id = r.id;
            if (watch != 0) {
                streams_.at(watch).call = 0;
                streams_.at(watch).deadline = Clock::time_point::max();
                watches_[id] = watch;
            }
            return answer(call, ResourceReply::ok(nlohmann::json::object()));
        }
    }
}

}  // namespace ptyvisor::cli::mcp
