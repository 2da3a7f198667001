// LD_PRELOAD into a test's daemon: every fourth readv() of a terminal's master side fails with
// EIO before it reads anything, never twice in a row. Linux does the same on its own, rarely:
// a read can say EIO while the last of a finished program's output is still on its way into
// the line discipline (session.cpp, read_terminal). This makes that happen on every session,
// so that a daemon which takes the first EIO for the end of the output fails its test each
// time, not once in hundreds of runs.
#include <dlfcn.h>
#include <errno.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <termios.h>

#include <atomic>

namespace {

using ReadvFn = ssize_t (*)(int, const iovec*, int);

std::atomic<unsigned> g_master_reads{0};

bool is_terminal_master(int fd) {
    unsigned number = 0;
    return ::ioctl(fd, TIOCGPTN, &number) == 0;  // only the master side has a pty number to give
}

}  // namespace

extern "C" ssize_t readv(int fd, const iovec* iov, int count) {
    static const auto real = reinterpret_cast<ReadvFn>(::dlsym(RTLD_NEXT, "readv"));
    if (is_terminal_master(fd) && ++g_master_reads % 4 == 0) {
        errno = EIO;
        return -1;
    }
    return real(fd, iov, count);
}
