// The daemon's CPU priority against the sessions it relays.
//
// One daemon thread relays every session's bytes. Under a fair share per process, fifteen
// sessions flooding output leave it one share among thirty, and the one session a person
// types into waits behind them all (docs/performance.md, "Fairness"). So the daemon runs at a
// lower nice value than its sessions, and in a scheduler autogroup of its own at that value
// when it leads its process session (as systemd's services do; the kernel shares the CPU
// between autogroups first, then between their processes).
//
// Invariants: the daemon never raises its nice value with this (a higher value is left
// alone), and every session gets the original value back, or 0 if that was lower
// (session_nice): a session is the agent's, never scheduled above it.
#pragma once

#include <cstdint>

namespace ptyvisor {

// The kernel's struct sched_attr, as sched_getattr and sched_setattr take it (glibc 2.36
// declares neither it nor those calls).
struct SchedAttr {
    std::uint32_t size, policy;
    std::uint64_t flags;
    std::int32_t nice;
    std::uint32_t priority;
    std::uint64_t runtime, deadline, period;  // runtime: the slice in ns for SCHED_OTHER; 0 the default
    std::uint32_t util_min, util_max;
};

// Lowers this thread's nice value to `nice` (and the autogroup's, see above). Call it before
// any thread exists: nice is per thread, and threads inherit it. 0 or -errno of setpriority.
int raise_relay_priority(int nice);

// The nice value the process started with.
int original_nice();

// The nice value a session gets: the one the daemon started with, but never below 0, which an
// unprivileged process cannot take for itself. A unit that starts the daemon with Nice=-10
// (systemd/ptyvisord.service) must not pass that on to the agent's sessions.
int session_nice();

// Asks for a short time slice for this thread (EEVDF's per-task slice, Linux 6.12 and later):
// when a keystroke wakes it, it runs before tasks with the default slice (about 3 ms) and
// may preempt one, instead of waiting behind every busy process of the machine. The share of
// CPU is unchanged: that stays with the nice value, so this gives a relay nothing over the
// agent but promptness. Older kernels accept and ignore it. 0 or -errno of sched_setattr.
int request_short_slice();

// Gives this thread the scheduling a process of its own starts with: SCHED_OTHER at `nice`,
// with the kernel's default slice. Every process the daemon forks inherits the main thread's
// short slice and nice value, and must shed both (a session that kept the slice preempted
// and was preempted ten times as often: half the throughput of a flood). 0 or -errno.
int reset_scheduling(int nice);

}  // namespace ptyvisor
