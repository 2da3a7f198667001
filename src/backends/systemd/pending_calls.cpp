#include "backends/systemd/pending_calls.h"

#include <cerrno>
#include <exception>
#include <iterator>

#include "common/log.h"

namespace ptyvisor::backends::systemd {

int PendingCalls::call(sd_bus* bus, sd_bus_message* m, Handler on_reply) {
    if (!bus) return -ENOTCONN;
    auto& call = calls_.emplace_back();
    call.owner = this;
    call.self = std::prev(calls_.end());
    call.on_reply = std::move(on_reply);
    sd_bus_slot* raw = nullptr;
    const int r = sd_bus_call_async(bus, &raw, m, &PendingCalls::on_reply, &call, 0);
    call.slot.reset(raw);
    if (r < 0) calls_.erase(call.self);
    return r;
}

int PendingCalls::on_reply(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* call = static_cast<Call*>(userdata);
    Handler handler = std::move(call->on_reply);
    // Drops the slot inside its own callback: sd-bus holds a reference until we return.
    call->owner->calls_.erase(call->self);
    // An exception must not unwind through sd-bus' C frames.
    try {
        if (handler) handler(m);
    } catch (const std::exception& e) {
        log_error("bus reply handler failed", {{"ERROR", e.what()}});
    } catch (...) {
        log_error("bus reply handler failed", {{"ERROR", "unknown exception"}});
    }
    return 0;
}

}  // namespace ptyvisor::backends::systemd
