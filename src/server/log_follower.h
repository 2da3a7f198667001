// LogFollower: whoever follows a session's output log: its clients (connections, through
// SessionClient), the screen broker (every session's) and a recorder (one session's). A
// session tells all of them the same way, from one list, in one order (Session::tell):
//  - log_opened: the log exists (a start, or a session taken back after a restart);
//  - log_read: bytes as the terminal gave them, before anything can overwrite them in the
//    ring: for who must keep every byte (a Recorder);
//  - log_changed: after a batch of reads, or at the session's end: for who reads the log at
//    a cursor of its own (a connection, the screen broker);
//  - log_resized, and log_closed when the session goes.
// Each has a default that does nothing: a follower overrides what it needs.
#pragma once

#include <cstdint>
#include <span>

#include "server/screen_subject.h"

namespace ptyvisor::server {

class LogFollower {
public:
    virtual void log_opened(ScreenSubject& session) { (void)session; }
    virtual void log_read(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second) {
        (void)first;
        (void)second;
    }
    virtual void log_changed(ScreenSubject& session) { (void)session; }
    virtual void log_resized(ScreenSubject& session) { (void)session; }
    virtual void log_closed(ScreenSubject& session) { (void)session; }

protected:
    ~LogFollower() = default;
};

}  // namespace ptyvisor::server
