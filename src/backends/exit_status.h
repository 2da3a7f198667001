// How a session's main process ended, in the protocol's terms.
//
// Both backends learn it as the kernel's child codes: waitid() gives the direct backend
// si_code and si_status, and systemd passes on the same pair as ExecMainCode and
// ExecMainStatus. Each backend translates its own input to a ChildCode; the mapping to
// protocol::ExitStatus is this one.
#pragma once

#include "protocol/payloads.h"

namespace ptyvisor::backends {

// si_code / ExecMainCode (CLD_EXITED, CLD_KILLED or CLD_DUMPED; anything else is unknown)
// and si_status / ExecMainStatus (the exit code, or the signal).
struct ChildCode {
    int code = 0;
    int status = 0;
};

// Kind Exited with the code, or Signaled with the signal (and core_dumped for CLD_DUMPED),
// or Unknown. The reason is Exited and unit_result empty: a backend that knows more (systemd's
// Result) adds it.
protocol::ExitStatus exit_status_from(ChildCode child);

}  // namespace ptyvisor::backends
