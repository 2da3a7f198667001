#include "backends/exit_status.h"

#include <sys/wait.h>

namespace ptyvisor::backends {

protocol::ExitStatus exit_status_from(ChildCode child) {
    protocol::ExitStatus s;
    switch (child.code) {
        case CLD_EXITED:
            s.kind = protocol::ExitStatus::Kind::Exited;
            s.code = child.status;
            break;
        case CLD_KILLED:
        case CLD_DUMPED:
            s.kind = protocol::ExitStatus::Kind::Signaled;
            s.signal = child.status;
            s.core_dumped = child.code == CLD_DUMPED;
            break;
        default: s.kind = protocol::ExitStatus::Kind::Unknown; break;
    }
    s.reason = protocol::ExitReason::Exited;
    return s;
}

}  // namespace ptyvisor::backends
