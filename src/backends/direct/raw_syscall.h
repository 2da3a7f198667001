// Raw system calls for a child that shares the daemon's address space until it execs
// (spawn.h): they return -errno and never write errno, which the child would share with the
// daemon's loop thread. Nothing here allocates or locks.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace ptyvisor::backends::direct {

#if defined(__x86_64__)
inline long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
    long ret;
    register long r10 asm("r10") = d;
    register long r8 asm("r8") = e;
    register long r9 asm("r9") = f;
    asm volatile("syscall"
                 : "=a"(ret)
                 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                 : "rcx", "r11", "memory");
    return ret;
}
#else
// Only forked children run here (no shared memory), so errno is the child's own.
inline long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
    const long r = ::syscall(n, a, b, c, d, e, f);
    return r < 0 ? -errno : r;
}
#endif

template <typename T>
long arg(T* p) {
    return static_cast<long>(reinterpret_cast<std::uintptr_t>(p));
}

}  // namespace ptyvisor::backends::direct
