#include "screen/sandbox.h"

#include <grp.h>
#include <linux/close_range.h>
#include <pwd.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/scheduling.h"

namespace ptyvisor::screen {
namespace {

constexpr int kNice = 10;

bool fail(std::string& why, const std::string& what) {
    why = what + ": " + std::strerror(errno);
    return false;
}

// Where the empty root is made: the daemon's runtime directory under systemd (its unit makes
// the rest of the file system read-only, /tmp included), else /tmp.
std::string scratch_directory() {
    const char* runtime = std::getenv("RUNTIME_DIRECTORY");  // "a:b" for several; the first
    std::string dir = runtime && *runtime == '/' ? std::string(runtime).substr(0, std::string(runtime).find(':')) : "/tmp";
    return dir;
}

bool enter_empty_root(std::string& why) {
    std::string path = scratch_directory() + "/ptyvisor-screen.XXXXXX";
    char* dir = path.data();
    if (!::mkdtemp(dir)) return fail(why, "mkdtemp in " + scratch_directory());
    if (::chdir(dir) < 0) return fail(why, "chdir");
    if (::rmdir(dir) < 0) return fail(why, "rmdir");
    if (::chroot(".") < 0) return fail(why, "chroot");
    if (::chdir("/") < 0) return fail(why, "chdir /");
    return true;
}

bool drop_to(uid_t uid, gid_t gid, std::string& why) {
    if (uid == 0 || gid == 0) {
        why = "the screen account must not be root";
        return false;
    }
    if (::setgroups(0, nullptr) < 0) return fail(why, "setgroups");
    if (::setresgid(gid, gid, gid) < 0) return fail(why, "setresgid");
    if (::setresuid(uid, uid, uid) < 0) return fail(why, "setresuid");
    if (::setuid(0) == 0 || ::geteuid() == 0) {
        why = "root could be regained";
        return false;
    }
    return true;
}

bool limit(std::string& why) {
    const rlimit zero{0, 0};
    if (::setrlimit(RLIMIT_FSIZE, &zero) < 0) return fail(why, "RLIMIT_FSIZE");
    if (::setrlimit(RLIMIT_NPROC, &zero) < 0) return fail(why, "RLIMIT_NPROC");
    if (::setrlimit(RLIMIT_CORE, &zero) < 0) return fail(why, "RLIMIT_CORE");
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return fail(why, "PR_SET_NO_NEW_PRIVS");
    if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) return fail(why, "PR_SET_DUMPABLE");
    return true;
}

struct FilterRelease {
    void operator()(scmp_filter_ctx c) const { seccomp_release(c); }
};

bool install_filter(std::string& why) {
    std::unique_ptr<void, FilterRelease> ctx(seccomp_init(SCMP_ACT_KILL_PROCESS));
    if (!ctx) {
        why = "seccomp_init failed";
        return false;
    }
    // Plain calls: I/O on descriptors already held, memory, time, exit.
    static const int kAllowed[] = {
        SCMP_SYS(read),      SCMP_SYS(write),        SCMP_SYS(recvmsg),   SCMP_SYS(sendmsg),
        SCMP_SYS(sendto),    SCMP_SYS(poll),         SCMP_SYS(ppoll),
        SCMP_SYS(close),     SCMP_SYS(munmap),       SCMP_SYS(brk),       SCMP_SYS(mremap),
        SCMP_SYS(madvise),   SCMP_SYS(futex),        SCMP_SYS(exit),      SCMP_SYS(exit_group),
        SCMP_SYS(rt_sigreturn), SCMP_SYS(clock_gettime), SCMP_SYS(getpid), SCMP_SYS(gettid),
        SCMP_SYS(rt_sigprocmask), SCMP_SYS(restart_syscall),
    };
    for (const int nr : kAllowed)
        if (seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 0) < 0) {
            why = "seccomp_rule_add failed";
            return false;
        }
#if defined(__SANITIZE_ADDRESS__)
    // The ASan+UBSan build only: the sanitizer runtime probes memory through a pipe and
    // handles its own signals. None of these reaches a file system or another process.
    static const int kSanitizerRuntime[] = {
        SCMP_SYS(pipe2), SCMP_SYS(pipe), SCMP_SYS(sched_yield), SCMP_SYS(sigaltstack),
        SCMP_SYS(rt_sigaction), SCMP_SYS(getrlimit), SCMP_SYS(prlimit64), SCMP_SYS(nanosleep),
    };
    for (const int nr : kSanitizerRuntime)
        if (seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 0) < 0) {
            why = "seccomp_rule_add failed";
            return false;
        }
#endif
    // mmap and mprotect, never executable; abort() may signal itself only.
    if (seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) < 0 ||
        seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
                         SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) < 0 ||
        seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
                         SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(::getpid()))) < 0) {
        why = "seccomp_rule_add failed";
        return false;
    }
    if (const int r = seccomp_load(ctx.get()); r < 0) {
        errno = -r;
        return fail(why, "seccomp_load");
    }
    return true;
}

}  // namespace

namespace {

bool confine(const passwd* (*lookup)(const std::string&), const std::string& user, uid_t uid, gid_t gid,
             std::string& why) {
    if (::syscall(SYS_close_range, 4u, ~0u, 0u) < 0) return fail(why, "close_range");
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) return fail(why, "PR_SET_PDEATHSIG");
    // Behind the relay for the CPU: a screen may lag, the sessions' bytes may not.
    // Nor may it keep the daemon's short slice, which it inherited (common/scheduling.h).
    if (const int r = reset_scheduling(kNice); r < 0) {
        errno = -r;
        return fail(why, "sched_setattr");
    }
    // The account is looked up while /etc is still there.
    if (lookup) {
        const passwd* pw = lookup(user);
        if (!pw) {
            why = "no account " + user;
            return false;
        }
        uid = pw->pw_uid;
        gid = pw->pw_gid;
    }
    if (uid == 0 || gid == 0) {
        why = "the worker may not run as root";
        return false;
    }
    if (!enter_empty_root(why)) return false;
    if (!drop_to(uid, gid, why)) return false;
    return limit(why) && install_filter(why);
}

const passwd* lookup_account(const std::string& user) { return ::getpwnam(user.c_str()); }

}  // namespace

bool enter_sandbox(const std::string& user, std::string& why) { return confine(lookup_account, user, 0, 0, why); }

bool enter_sandbox(uid_t uid, gid_t gid, std::string& why) { return confine(nullptr, std::string(), uid, gid, why); }

}  // namespace ptyvisor::screen
