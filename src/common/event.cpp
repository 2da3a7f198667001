#include "common/event.h"

#include <cerrno>
#include <exception>
#include <string>
#include <string_view>

#include "common/log.h"

namespace ptyvisor {
namespace {

template <class F>
void destroy_handler(void* userdata) {
    delete static_cast<F*>(userdata);
}

// The last line of defence: an exception never unwinds through sd-event's C frames, and
// never ends the loop. Owners of a handler catch their own (a connection ends itself);
// what arrives here is logged, and the source stays as it is.
template <class F>
int run_handler(F&& f) noexcept {
    try {
        f();
    } catch (const std::exception& e) {
        log_error("event handler failed", {{"ERROR", e.what()}});
    } catch (...) {
        log_error("event handler failed", {{"ERROR", "unknown exception"}});
    }
    return 0;
}

int on_io(sd_event_source*, int, std::uint32_t revents, void* userdata) {
    return run_handler([&] { (*static_cast<IoHandler*>(userdata))(revents); });
}

int on_time(sd_event_source*, std::uint64_t, void* userdata) {
    return run_handler([&] { (*static_cast<TimerHandler*>(userdata))(); });
}

int on_defer(sd_event_source*, void* userdata) {
    return run_handler([&] { (*static_cast<TimerHandler*>(userdata))(); });
}

// Hands ownership of `fn` to the source: sd-event destroys it with the source. On failure
// the source is gone and `fn` with it.
// "connection.cpp:87": the file's name and the line that added the source.
void name_after(sd_event_source* s, std::string_view file, int line) {
    if (const auto slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
    const std::string name = std::string(file) + ":" + std::to_string(line);
    (void)sd_event_source_set_description(s, name.c_str());  // a name is only a help
}

template <class F>
int adopt(sd_event_source* s, EventSource& out, F* fn, const char* file, int line) {
    name_after(s, file, line);
    EventSource source(s);
    if (const int r = sd_event_source_set_destroy_callback(s, destroy_handler<F>); r < 0) {
        delete fn;
        return r;
    }
    out = std::move(source);
    return 0;
}

}  // namespace

int add_io(sd_event* e, EventSource& out, int fd, std::uint32_t events, IoHandler handler,
           const char* file, int line) {
    auto* fn = new IoHandler(std::move(handler));
    sd_event_source* s = nullptr;
    const int r = sd_event_add_io(e, &s, fd, events, on_io, fn);
    if (r < 0) {
        delete fn;
        return r;
    }
    return adopt(s, out, fn, file, line);
}

int add_timer(sd_event* e, EventSource& out, std::uint64_t after_usec, TimerHandler handler,
              const char* file, int line) {
    auto* fn = new TimerHandler(std::move(handler));
    sd_event_source* s = nullptr;
    const int r = sd_event_add_time_relative(e, &s, CLOCK_MONOTONIC, after_usec, 1000, on_time, fn);
    if (r < 0) {
        delete fn;
        return r;
    }
    return adopt(s, out, fn, file, line);
}

int add_defer(sd_event* e, EventSource& out, TimerHandler handler, const char* file, int line) {
    auto* fn = new TimerHandler(std::move(handler));
    sd_event_source* s = nullptr;
    int r = sd_event_add_defer(e, &s, on_defer, fn);
    if (r >= 0) r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
    if (r < 0) {
        sd_event_source_unref(s);  // before adopt(), no destroy callback deletes `fn`
        delete fn;
        return r;
    }
    return adopt(s, out, fn, file, line);
}

}  // namespace ptyvisor

namespace ptyvisor {

int rearm_timer(sd_event* e, EventSource& timer, std::uint64_t after_usec, TimerHandler handler,
                const char* file, int line) {
    if (!timer) return add_timer(e, timer, after_usec, std::move(handler), file, line);
    const int r = sd_event_source_set_time_relative(timer.get(), after_usec);
    if (r < 0) return r;
    return sd_event_source_set_enabled(timer.get(), SD_EVENT_ONESHOT);
}

int set_io_events(EventSource& source, std::uint32_t events) {
    if (!source) return 0;
    if (events == 0) return sd_event_source_set_enabled(source.get(), SD_EVENT_OFF);
    if (const int r = sd_event_source_set_io_events(source.get(), events); r < 0) return r;
    return sd_event_source_set_enabled(source.get(), SD_EVENT_ON);
}

void describe_source(EventSource& source, const std::string& name) {
    // A name that cannot be set only makes the debug log less helpful.
    if (source) (void)sd_event_source_set_description(source.get(), name.c_str());
}

}  // namespace ptyvisor
