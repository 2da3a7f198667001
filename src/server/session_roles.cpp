#include "server/session_roles.h"

namespace ptyvisor::server {

Access access_of(const Requester& requester) {
    if (requester.may_start) return Access::Control;
    if (requester.is_root || requester.in_supervisor_group) return Access::Supervise;
    if (requester.in_observer_group) return Access::Observe;
    return Access::None;
}

AttachDecision decide_attach(Access access, Role wanted, bool has_controller, bool takeover) {
    if (wanted == Role::Observer) return access == Access::None ? AttachDecision::NotAllowed : AttachDecision::Attach;
    // A supervisor's "controller with takeover" is the person taking the terminal.
    if (access == Access::Supervise && takeover) return AttachDecision::AttachHolding;
    if (access != Access::Control) return AttachDecision::NotAllowed;
    if (!has_controller) return AttachDecision::Attach;
    return takeover ? AttachDecision::AttachTakingOver : AttachDecision::Busy;
}

bool may(Access access, Request request) {
    switch (request) {
        case Request::List:
        case Request::Read:
        case Request::Wait: return access != Access::None;
        case Request::Send:
        case Request::Kill:
        case Request::Resize: return access == Access::Control;
    }
    return false;
}

}  // namespace ptyvisor::server
