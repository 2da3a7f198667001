// Who may do what to a session: pure rules, decided from facts the server has checked.
//
// The controller writes input, resizes and signals; there is at most one. Observers only
// read. Whoever may START may control (the agent's account, from an allowed place, never
// from inside a session); root and the members of the configured observer group may
// observe. Root and the members of the supervisor group may also supervise: observe, and
// take the terminal from the agent for a while (a person at the wheel; session.h, Holder).
// Taking a controller's or the agent's place is explicit (`takeover`, CONTROL), never a side
// effect.
#pragma once

namespace ptyvisor::server {

enum class Role { Controller, Observer };

// What the server established about a requesting peer.
struct Requester {
    bool may_start = false;          // the agent, and check_peer() allowed it
    bool is_root = false;            // uid 0, outside every session
    bool in_observer_group = false;  // a member of the configured observer group, outside every session
    bool in_supervisor_group = false;  // a member of the configured supervisor group, outside every session
};

// Supervise is Observe, and holding the terminal; it is not Control (no SEND, KILL, START).
enum class Access { None, Observe, Supervise, Control };

// The most a requester may do to any session of the agent's.
Access access_of(const Requester& requester);

enum class AttachDecision {
    Attach,             // in the role asked for
    AttachTakingOver,   // as controller; the present controller is detached
    AttachHolding,      // a supervisor: as a reader that holds the terminal (session.h, Holder)
    Busy,               // a controller is attached and takeover was not asked for
    NotAllowed,         // the requester may not have that role
};

AttachDecision decide_attach(Access access, Role wanted, bool has_controller, bool takeover);

// Requests that act on a session without attaching.
enum class Request { List, Read, Wait, Send, Kill, Resize };
bool may(Access access, Request request);

}  // namespace ptyvisor::server
