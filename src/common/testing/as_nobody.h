// For unit tests only: runs a body as nobody, in a child process.
//
// Some kernel limits bind every account but root (the descriptors an account may have in
// flight, for one); a test that must meet them, and runs as root in CI, drops to nobody in a
// child. The child's exit code is the body's answer; 100 and up mean it could not drop.
#pragma once

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace ptyvisor::testing {

inline int run_as_nobody(const std::function<int()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
            ::setresuid(65534, 65534, 65534) != 0)
            ::_exit(100);
        ::_exit(body());
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 101;
    return WEXITSTATUS(status);
}

}  // namespace ptyvisor::testing
