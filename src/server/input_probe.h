// The kernel's answer to "is this session's foreground program blocked reading its terminal?"
//
// The kernel has no event for "a reader blocked on a tty": a pty master becomes writable, never
// "the other side now waits for input". So the daemon asks /proc, and only while someone wants
// the answer (a WAIT for input, an exec, a LIST) after the output has paused. This is the
// cheapest sound test: the foreground process group has no member list in the kernel's
// interface, so finding its members takes one read of /proc/PID/stat per process of the session's
// cgroup (which every process the session forks stays in), or, without one, per process on the
// host; everything else is bounded by the group's size.
//
// Costs of one probe_input_wait (measured by bench/input_probe_bench):
//  - ioctl(TIOCGPGRP) on the master: the foreground group;
//  - open+read+close of /proc/PID/stat (about 7 µs each) for every process of the session's
//    cgroup tree (its cgroup.procs files), or, without a cgroup, of the host: this dominates.
//    Measured on a loaded 2-core VM, median per probe: a shell at its prompt 35 µs in its own
//    cgroup, 1.2 ms by the host scan (120 processes); ten processes reading the terminal 0.2 ms.
//  - for each task of the group (at most kMaxProbedTasks, else Unknown): its stat (threads only;
//    a single-threaded process's state comes from the scan) and its /proc/.../syscall;
//  - for a task asleep in read/readv/write/writev: one statx of the fd;
//    in poll/ppoll: one process_vm_readv of its pollfd array (at most kMaxWatchedFds) and one
//    statx per watched-for-reading fd until the terminal is found; select/pselect6: the same
//    with its read fd_set; epoll_wait/epoll_pwait/epoll_pwait2: /proc/.../fdinfo/EPFD and one
//    statx per watched fd.
// Each statx passes AT_STATX_DONT_SYNC and asks only for the type, so a file on a hung network
// or FUSE file system cannot make the daemon wait for its server.
//
// Everything read from /proc belongs to the session's processes, which are hostile and may exit
// mid-probe: a failure makes the answer Unknown or Busy, never Waiting, never a crash.
//
// Verdict. Each task of the foreground group is one of:
//  - working: state R or D, stopped (T, t), in a system call other than those below, or asleep
//    in read of something other than the terminal or a pipe (a socket, a timer...);
//  - reading the terminal: asleep (S) in read/readv of the terminal, or in poll/ppoll/select/
//    pselect6/epoll_wait/epoll_pwait/epoll_pwait2 whose set watches the terminal for reading;
//  - waiting on something else: wait4, waitid, futex, futex_waitv, rt_sigsuspend, pause,
//    rt_sigtimedwait without a timeout (glibc's timer thread), read/readv/write/writev of a
//    pipe (the other end of `prompt | tee log` or `git log`'s pager), or poll/select/epoll
//    over a set without the terminal (another event loop of the program: node's REPL reads
//    the terminal in one thread while libuv's waits on its eventfds in another);
//  - gone: a zombie, or a task that exited mid-probe.
// Waiting: at least one task reads the terminal and none works. Busy: a task works, or no task
// reads the terminal. Unknown: no foreground group, no process in it, too many tasks, or a
// /proc answer that cannot be parsed.
//
// The terminal is recognised by its device (st_dev and st_rdev), or as /dev/tty (5:0) in a
// process whose controlling terminal is this one. (An fd for another session's /dev/tty passed
// in over a socket would be mistaken for this terminal: the session's own processes can only lie
// about themselves.) pread/preadv never block on a terminal (ESPIPE), so they are not looked for.
// System call numbers are the daemon's architecture's; a 32-bit (compat) task's differ, so a task
// whose stack pointer lies below 4 GiB is taken for one and makes the answer Unknown.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

namespace ptyvisor::server {

// The terminal's slave side, identified once (at session start) through the master: the peer is
// opened with TIOCGPTPEER as O_PATH (no tty open, no path a client controls), then fstat'ed.
struct TerminalIdentity {
    dev_t dev = 0;   // st_dev: the devpts instance
    dev_t rdev = 0;  // st_rdev: the terminal's device number
    bool known = false;
};

// known is false if `master_fd` is not a pty master or the peer cannot be opened.
TerminalIdentity identify_terminal(int master_fd);

// The terminal's foreground process group (ioctl TIOCGPGRP on the master), or nullopt if it
// has none or the ioctl fails.
std::optional<pid_t> foreground_group(int master_fd);

// Bounds of one probe: beyond any, the answer is Unknown.
inline constexpr std::size_t kMaxProbedTasks = 64;         // tasks (threads) of the group examined
inline constexpr std::size_t kMaxWatchedFds = 1024;        // pollfds, select bits or epoll entries
inline constexpr std::size_t kMaxSessionProcesses = 4096;  // listed in the session's cgroup tree
inline constexpr std::size_t kMaxSessionCgroups = 64;      // directories of that tree
inline constexpr int kMaxSessionCgroupDepth = 8;

struct InputWait {
    enum class State { Waiting, Busy, Unknown };
    State state = State::Unknown;
    pid_t foreground = 0;  // the foreground process group; 0 if none
    pid_t reader = 0;      // Waiting: the process whose task is blocked reading the terminal
    std::string why;       // for logs and tests: "pid 123 state R", "pid 123 in read(0) on the terminal"
};

// One probe, as described above. `session_cgroup`: an O_DIRECTORY fd of the session's cgroup v2
// directory, whose tree holds every process of the session (a process can leave it only by
// writing to a cgroup.procs, which only lies about its own session); -1, or a directory that
// cannot be read, makes the probe scan every process on the host. Never throws (a failure to
// allocate is Unknown).
InputWait probe_input_wait(int master_fd, const TerminalIdentity& terminal, int session_cgroup = -1);

}  // namespace ptyvisor::server
