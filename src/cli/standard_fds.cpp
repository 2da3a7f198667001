#include "cli/standard_fds.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace ptyvisor::cli {

void ensure_standard_fds() {
    for (int fd = 0; fd <= 2; ++fd) {
        if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        // open() returns the lowest free descriptor, which is this one.
        const int opened = ::open("/dev/null", O_RDWR);
        if (opened >= 0 && opened != fd) ::close(opened);
    }
}

}  // namespace ptyvisor::cli
