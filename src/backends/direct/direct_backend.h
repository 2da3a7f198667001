// The direct backend: the daemon forks and execs each session itself. For machines without
// systemd (containers, build machines); the systemd backend is the production choice.
//
// Each session's processes live in a cgroup v2 directory of their own (session_cgroup.h)
// where the machine allows one, and otherwise in the process group of a leader we track
// by pidfd. Each session is recorded on disk (session_records.h) until stop() has ended all
// of its processes, so that what a crash, or a session let go without stop() (backend.h),
// leaves running is found by the next run's cleanup_orphans().
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"

namespace ptyvisor::backends {

std::unique_ptr<Backend> make_direct_backend(const BackendOptions& options, std::string& why);

}  // namespace ptyvisor::backends
