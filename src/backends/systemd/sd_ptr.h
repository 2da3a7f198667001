// RAII owners for the sd-bus objects the systemd backend holds (sd-event's are in
// common/event.h: one declaration per type).
//
// Every sd_bus, sd_bus_message and sd_bus_slot goes into one of these at once. Dropping a
// slot removes its match or cancels its pending call, so an object that owns its slots can
// never be called back after it is destroyed.
#pragma once

#include <systemd/sd-bus.h>

#include <memory>
#include <cstring>
#include <string>

namespace ptyvisor::backends::systemd {

struct BusUnref {
    // Closes without flushing: flushing blocks, and the event loop must not block.
    void operator()(sd_bus* bus) const noexcept { sd_bus_close_unref(bus); }
};
using BusPtr = std::unique_ptr<sd_bus, BusUnref>;

struct MessageUnref {
    void operator()(sd_bus_message* m) const noexcept { sd_bus_message_unref(m); }
};
using MessagePtr = std::unique_ptr<sd_bus_message, MessageUnref>;

struct SlotUnref {
    void operator()(sd_bus_slot* s) const noexcept { sd_bus_slot_unref(s); }
};
using SlotPtr = std::unique_ptr<sd_bus_slot, SlotUnref>;

// sd_bus_error with automatic sd_bus_error_free.
class BusError {
public:
    BusError() = default;
    BusError(const BusError&) = delete;
    BusError& operator=(const BusError&) = delete;
    ~BusError() { sd_bus_error_free(&error_); }
    sd_bus_error* get() noexcept { return &error_; }
    [[nodiscard]] bool is_set() const noexcept { return sd_bus_error_is_set(&error_) != 0; }
    [[nodiscard]] bool has_name(const char* name) const noexcept {
        return sd_bus_error_has_name(&error_, name) != 0;
    }
    [[nodiscard]] std::string message() const {
        if (error_.message) return error_.message;
        if (error_.name) return error_.name;
        return "unknown error";
    }

private:
    sd_bus_error error_{};  // SD_BUS_ERROR_NULL, without its C99 compound literal
};

inline std::string describe_errno(int r) {
    return std::string(std::strerror(r < 0 ? -r : r));
}

}  // namespace ptyvisor::backends::systemd
