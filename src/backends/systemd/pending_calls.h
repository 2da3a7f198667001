// PendingCalls: method calls in flight, each with a bus slot of its own.
//
// Invariants:
//  - One slot per call, never one per kind of call: sending a call never cancels another
//    still in flight, whatever it asks.
//  - Each reply's handler runs at most once, from the event loop, and its call has left the
//    set before it runs, so a handler may destroy the set's owner.
//  - Destroying the set, or clear(), cancels every call still in flight (their slots go), so
//    no reply reaches an owner that is gone or a bus that has been replaced.
#pragma once

#include <systemd/sd-bus.h>

#include <cstddef>
#include <functional>
#include <list>

#include "backends/systemd/sd_ptr.h"

namespace ptyvisor::backends::systemd {

class PendingCalls {
public:
    // Gets the reply, or the error sd-bus synthesises when the call fails or times out.
    using Handler = std::function<void(sd_bus_message* reply)>;

    PendingCalls() = default;
    PendingCalls(const PendingCalls&) = delete;
    PendingCalls& operator=(const PendingCalls&) = delete;

    // Sends `m` on `bus`. Returns a negative errno when it could not be sent; `on_reply` is
    // then never called.
    int call(sd_bus* bus, sd_bus_message* m, Handler on_reply);
    // Cancels every call in flight.
    void clear() { calls_.clear(); }
    [[nodiscard]] std::size_t size() const { return calls_.size(); }

private:
    struct Call {
        PendingCalls* owner = nullptr;
        std::list<Call>::iterator self;
        SlotPtr slot;
        Handler on_reply;
    };
    static int on_reply(sd_bus_message* m, void* userdata, sd_bus_error* error);

    std::list<Call> calls_;  // a list: each Call's address is its slot's userdata
};

}  // namespace ptyvisor::backends::systemd
