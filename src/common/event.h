// RAII owners for sd-event objects, and the callback trampolines that let a member
// function serve as an sd-event handler. Every sd_event and sd_event_source the daemon holds
// is in one of these owners, declared here and nowhere else.
//
// Destroying an EventSource disables it first, so a callback can never run for an object
// that is gone.
#pragma once

#include <systemd/sd-event.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ptyvisor {

struct EventSourceUnref {
    void operator()(sd_event_source* s) const noexcept { sd_event_source_disable_unref(s); }
};
using EventSource = std::unique_ptr<sd_event_source, EventSourceUnref>;

struct EventUnref {
    void operator()(sd_event* e) const noexcept { sd_event_unref(e); }
};
using EventLoop = std::unique_ptr<sd_event, EventUnref>;

// Monotonic now in sd-event's microseconds.
inline std::uint64_t now_usec(sd_event* e) {
    std::uint64_t t = 0;
    sd_event_now(e, CLOCK_MONOTONIC, &t);
    return t;
}

inline std::uint64_t to_usec(std::chrono::duration<double> d) {
    return static_cast<std::uint64_t>(d.count() * 1e6);
}

// Every source these add is named after the place that added it ("connection.cpp:87"), so
// that sd-event's debug log and introspection say whose it is, as systemd names its own
// (ptyfwd.c); describe_source() gives a source a name of its own (a session's id). The place
// comes from the compiler's __builtin_FILE and __builtin_LINE as default arguments (the call
// site's), not std::source_location, which clang 14 (the fuzz build) lacks with libstdc++ 12.
//
// Adds an io source whose callback is a std::function; the function lives as long as the
// source. Returns 0 or a negative errno (docs/architecture.md, "Error conventions"); on
// failure `out` is untouched.
using IoHandler = std::function<void(std::uint32_t revents)>;
int add_io(sd_event* e, EventSource& out, int fd, std::uint32_t events, IoHandler handler,
           const char* file = __builtin_FILE(), int line = __builtin_LINE());

// A one-shot monotonic timer `after` microseconds from now. Returns 0 or a negative errno.
using TimerHandler = std::function<void()>;
int add_timer(sd_event* e, EventSource& out, std::uint64_t after_usec, TimerHandler handler,
              const char* file = __builtin_FILE(), int line = __builtin_LINE());

// A "defer" source: runs once on the next loop iteration (used so that callbacks are never
// invoked from inside the call that registered them). Returns 0 or a negative errno.
int add_defer(sd_event* e, EventSource& out, TimerHandler handler,
              const char* file = __builtin_FILE(), int line = __builtin_LINE());

}  // namespace ptyvisor

namespace ptyvisor {
// Arms `timer` to fire once, `after_usec` from now, creating it on first use. Returns 0 or a
// negative errno.
int rearm_timer(sd_event* e, EventSource& timer, std::uint64_t after_usec, TimerHandler handler,
                const char* file = __builtin_FILE(), int line = __builtin_LINE());
// Sets an io source's events; 0 disables it. Returns 0 or a negative errno (a source that
// cannot be enabled stays as it was).
int set_io_events(EventSource& source, std::uint32_t events);
// Names a source, as sd-event's debug log and introspection show it (the way systemd's
// ptyfwd.c names its own). A source without a name is logged by its address only.
void describe_source(EventSource& source, const std::string& name);
}  // namespace ptyvisor
