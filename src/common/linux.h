// Kernel interfaces that Debian 12's glibc headers do not declare yet.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef SCM_MAX_FD
// The kernel's limit on descriptors in one SCM_RIGHTS message (include/net/scm.h).
#define SCM_MAX_FD 253
#endif

namespace ptyvisor {

inline int pidfd_open(pid_t pid, unsigned flags = 0) {
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, flags));
}

inline int pidfd_send_signal(int pidfd, int sig, unsigned flags = 0) {
    return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, flags));
}

// The PID a pidfd refers to in our PID namespace, from /proc/self/fdinfo; -1 when the
// process has been reaped, 0 when it lives outside our namespace, or on error.
pid_t pidfd_to_pid(int pidfd);

// True while the process behind pidfd has not exited.
bool pidfd_alive(int pidfd);

}  // namespace ptyvisor

#include <sys/resource.h>

namespace ptyvisor {

// Raises this process's soft RLIMIT_NOFILE to its hard limit (each session costs the daemon
// a few descriptors) and remembers the original, which sessions get back: programs that use
// select() break when started with a soft limit above 1024.
void raise_nofile_limit();
const rlimit& original_nofile_limit();

}  // namespace ptyvisor
