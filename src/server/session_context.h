// SessionContext: what a session needs from the daemon, and nothing else.
//
// The Server owns one and hands it to the SessionRegistry, which hands it to every Session.
// A unit test builds one from an sd-event loop, a Config, an Admission and a fake backend,
// with no Server (session_test.cpp). Every pointer outlives every session; the optional
// ones may be null, and then that service is simply absent (no recordings, no screen).
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include "backends/backend.h"
#include "server/admission.h"
#include "server/config.h"

namespace ptyvisor::server {

class AuditLog;
class Recordings;
class ScreenBroker;
class Session;

// Told when one of its sessions is Ended (the SessionRegistry).
class SessionOwner {
public:
    virtual void session_ended(Session& session) = 0;

protected:
    ~SessionOwner() = default;
};

struct SessionContext {
    sd_event* event = nullptr;
    const Config* config = nullptr;       // limits and timeouts
    uid_t agent_uid = 0;                  // whose sessions are adopted after a handover
    gid_t terminal_group = 0;             // the group of session terminals (pty.h)
    bool fd_store = false;                // sessions are kept in the fd store (Server::fd_store)
    Admission* admission = nullptr;       // the session slots
    backends::Backend* backend = nullptr;
    Recordings* recordings = nullptr;     // optional
    ScreenBroker* screens = nullptr;      // optional
    AuditLog* audit = nullptr;            // optional (a unit test's context has none)
};

}  // namespace ptyvisor::server
