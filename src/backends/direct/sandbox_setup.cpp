#include "backends/direct/sandbox_setup.h"

#include <algorithm>
#include <utility>

#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "backends/direct/raw_syscall.h"
#include "common/unique_fd.h"

// Debian 12's kernel headers stop at Landlock ABI 2; the kernel here offers 7. What we use of
// the newer ABIs, with the values of the kernel's include/uapi/linux/landlock.h:
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  // ABI 3: truncate(2), O_TRUNC
#endif

namespace ptyvisor::backends::direct {
namespace {

// The write rights this ABI knows: the ones a read-only session may use only beneath its
// writable set. Reading and executing stay as the mounts and permissions say.
std::uint64_t write_rights(int abi) {
    std::uint64_t r = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                      LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                      LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;     // linking or renaming across directories
    if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    return r;
}

// Brings "lo" up in the new network namespace: SIOCGIFFLAGS then SIOCSIFFLAGS with IFF_UP.
long loopback_up() {
    const long s = sys(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return s;
    ifreq ifr{};
    ifr.ifr_name[0] = 'l';
    ifr.ifr_name[1] = 'o';
    long r = sys(SYS_ioctl, s, SIOCGIFFLAGS, arg(&ifr));
    if (r == 0) {
        ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
        r = sys(SYS_ioctl, s, SIOCSIFFLAGS, arg(&ifr));
    }
    sys(SYS_close, s);
    return r;
}

long mount_tmpfs(const char* where, unsigned long flags, const char* options) {
    return sys(SYS_mount, arg("tmpfs"), arg(where), arg("tmpfs"), static_cast<long>(flags), arg(options));
}

long add_rule(long ruleset, long fd, std::uint64_t rights) {
    landlock_path_beneath_attr rule{};
    rule.allowed_access = rights;
    rule.parent_fd = static_cast<std::int32_t>(fd);
    return sys(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, arg(&rule), 0);
}

long add_path_rule(long ruleset, const char* path, std::uint64_t rights) {
    const long fd = sys(SYS_openat, AT_FDCWD, arg(path), O_PATH | O_CLOEXEC);
    if (fd == -ENOENT) return 0;  // nothing there: nothing to write to
    if (fd < 0) return fd;
    const long r = add_rule(ruleset, fd, rights);
    sys(SYS_close, fd);
    return r;
}

constexpr const char* kPrivateTmp[] = {"/tmp", "/var/tmp", "/dev/shm"};

long landlock(const SandboxPlan& p, long cwd_tree) {
    const std::uint64_t all = write_rights(p.landlock_abi);
    // Only the first field: a kernel of any ABI accepts that size.
    landlock_ruleset_attr attr{};
    attr.handled_access_fs = all;
    const long ruleset = sys(SYS_landlock_create_ruleset, arg(&attr), sizeof attr.handled_access_fs, 0);
    if (ruleset < 0) return ruleset;
    long r = cwd_tree >= 0 ? add_rule(ruleset, cwd_tree, all) : 0;
    for (char* const* w = p.writable; r == 0 && *w; ++w) r = add_path_rule(ruleset, *w, all);
    for (const char* t : kPrivateTmp)
        if (r == 0) r = add_path_rule(ruleset, t, all);
    // The terminal (/dev/tty, /dev/pts/N) and /dev/null, opened again by the session:
    // writing only; the read-only mount already refuses creating anything there.
    if (r == 0) r = add_path_rule(ruleset, "/dev", LANDLOCK_ACCESS_FS_WRITE_FILE | (p.landlock_abi >= 3 ? LANDLOCK_ACCESS_FS_TRUNCATE : 0));
    if (r == 0) r = sys(SYS_landlock_restrict_self, ruleset, 0);
    sys(SYS_close, ruleset);
    return r;
}

long hide(const char* path) {
    struct stat st{};
    const long r = sys(SYS_newfstatat, AT_FDCWD, arg(path), arg(&st), 0);
    if (r == -ENOENT) return 0;  // nothing to hide
    if (r < 0) return r;
    if (S_ISDIR(st.st_mode))
        return mount_tmpfs(path, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k");
    if (const long b = sys(SYS_mount, arg("/dev/null"), arg(path), 0, MS_BIND, 0); b < 0) return b;
    return sys(SYS_mount, 0, arg(path), 0, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0);
}

}  // namespace

long enter_sandbox(const SandboxPlan& p, int cwd, SandboxStep& step) {
    if (p.new_network) {
        step = SandboxStep::Network;
        if (const long r = sys(SYS_unshare, CLONE_NEWNET); r < 0) return r;
        step = SandboxStep::Loopback;
        if (const long r = loopback_up(); r < 0) return r;
    }
    if (!p.new_mounts) return 0;
    // Into the working directory first: unshare() carries the current directory over to the
    // new namespace's copy of its mount, which is what open_tree(".") clones below. No path
    // is looked up for it, so the agent cannot swap what it names.
    step = SandboxStep::MountNamespace;
    if (const long r = sys(SYS_fchdir, cwd); r < 0) return r;
    if (const long r = sys(SYS_unshare, CLONE_NEWNS); r < 0) return r;
    // Nothing we mount propagates back to the host, and nothing the host mounts later
    // (a writable mount) appears in here.
    step = SandboxStep::Propagation;
    if (const long r = sys(SYS_mount, 0, arg("/"), 0, MS_REC | MS_PRIVATE, 0); r < 0) return r;
    long cwd_tree = -1;
    if (p.read_only) {
        constexpr long clone = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE;
        step = SandboxStep::CloneCwd;
        if (p.writable_cwd) {
            cwd_tree = sys(SYS_open_tree, AT_FDCWD, arg("."), clone);
            if (cwd_tree < 0) return cwd_tree;
        }
        // The writable paths, cloned before everything turns read-only: the clones keep
        // their mounts' flags (a path on a read-only mount stays read-only).
        long trees[64];
        int count = 0;
        step = SandboxStep::CloneWritable;
        for (char* const* w = p.writable; *w && count < 64; ++w) {
            const long t = sys(SYS_open_tree, AT_FDCWD, arg(*w), clone);
            if (t < 0 && t != -ENOENT) return t;
            trees[count++] = t;
        }
        step = SandboxStep::ReadOnly;
        mount_attr ro{};
        ro.attr_set = MOUNT_ATTR_RDONLY;
        if (const long r = sys(SYS_mount_setattr, AT_FDCWD, arg("/"), AT_RECURSIVE, arg(&ro), sizeof ro); r < 0) return r;
        step = SandboxStep::MountCwd;
        if (cwd_tree >= 0) {
            if (const long r = sys(SYS_move_mount, cwd_tree, arg(""), AT_FDCWD, arg("."), MOVE_MOUNT_F_EMPTY_PATH); r < 0)
                return r;
            // "." still names the directory under the new mount: step onto the mount itself.
            if (const long r = sys(SYS_fchdir, cwd_tree); r < 0) return r;
        }
        step = SandboxStep::MountWritable;
        count = 0;
        for (char* const* w = p.writable; *w && count < 64; ++w) {
            const long t = trees[count++];
            if (t < 0) continue;
            const long r = sys(SYS_move_mount, t, arg(""), AT_FDCWD, arg(*w), MOVE_MOUNT_F_EMPTY_PATH);
            sys(SYS_close, t);
            if (r < 0) return r;
        }
        step = SandboxStep::PrivateTmp;
        for (const char* t : kPrivateTmp) {
            const long r = mount_tmpfs(t, MS_NOSUID | MS_NODEV, "mode=1777");
            if (r < 0 && r != -ENOENT) return r;
        }
    }
    step = SandboxStep::Hide;
    for (char* const* h = p.hidden; *h; ++h)
        if (const long r = hide(*h); r < 0) return r;
    if (p.read_only) {
        step = SandboxStep::Landlock;
        const long r = landlock(p, cwd_tree);
        if (cwd_tree >= 0) sys(SYS_close, cwd_tree);
        if (r < 0) return r;
    }
    return 0;
}

const char* describe(SandboxStep step) {
    switch (step) {
        case SandboxStep::Network: return "cannot create the network namespace";
        case SandboxStep::Loopback: return "cannot bring up loopback";
        case SandboxStep::MountNamespace: return "cannot create the mount namespace";
        case SandboxStep::Propagation: return "cannot make mounts private";
        case SandboxStep::CloneCwd: return "cannot clone the working directory's mount";
        case SandboxStep::CloneWritable: return "cannot clone a writable path";
        case SandboxStep::ReadOnly: return "cannot make the file system read-only";
        case SandboxStep::MountCwd: return "cannot mount the working directory writable";
        case SandboxStep::MountWritable: return "cannot mount a writable path";
        case SandboxStep::PrivateTmp: return "cannot mount the private /tmp";
        case SandboxStep::Hide: return "cannot hide a path";
        case SandboxStep::Landlock: return "cannot apply the Landlock rules";
    }
    return "cannot set up the sandbox";
}

SandboxSupport SandboxSupport::probe() {
    SandboxSupport s;
    const long abi = sys(SYS_landlock_create_ruleset, 0, 0, LANDLOCK_CREATE_RULESET_VERSION);
    s.landlock_abi = abi > 0 ? static_cast<int>(abi) : 0;
    // An invalid call: ENOSYS only where the kernel (or a seccomp filter) lacks it.
    s.mount_setattr = sys(SYS_mount_setattr, -1, arg(""), 0, 0, 0) != -ENOSYS;
    s.open_tree = sys(SYS_open_tree, -1, arg(""), 0) != -ENOSYS && sys(SYS_move_mount, -1, arg(""), -1, arg(""), 0) != -ENOSYS;
    // The namespaces, tried by a child that exits at once: a confined daemon (seccomp,
    // RestrictNamespaces=, no CAP_SYS_ADMIN) learns here, not at a session's START.
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) < 0) return s;
    UniqueFd rd(fds[0]), wr(fds[1]);
    const pid_t pid = ::fork();
    if (pid == 0) {
        // The child holds nothing of the daemon's but the pipe's write end: it exits with no
        // descriptor open that it did not need (memcheck's --track-fds judges it too).
        const int keep = wr.get();
        for (const auto& [lo, hi] : {std::pair<unsigned, unsigned>{3, static_cast<unsigned>(keep) - 1},
                                     std::pair<unsigned, unsigned>{static_cast<unsigned>(keep) + 1, ~0U}}) {
            if (lo > hi) continue;
            if (sys(SYS_close_range, lo, hi, 0) < 0)
                for (unsigned fd = lo; fd <= std::min(hi, 4095U); ++fd) sys(SYS_close, fd);
        }
        unsigned char bits = 0;
        if (sys(SYS_unshare, CLONE_NEWNET) == 0) bits |= 1;
        if (sys(SYS_unshare, CLONE_NEWNS) == 0) bits |= 2;
        sys(SYS_write, keep, arg(&bits), 1);
        sys(SYS_close, keep);
        sys(SYS_exit_group, 0);
    }
    wr.reset();
    if (pid < 0) return s;
    unsigned char bits = 0;
    if (::read(rd.get(), &bits, 1) == 1) {
        s.network_namespace = bits & 1;
        s.mount_namespace = bits & 2;
    }
    ::waitpid(pid, nullptr, 0);
    return s;
}

bool SandboxSupport::check(const SandboxProfile& p, std::string& why) const {
    if (p.network == SandboxProfile::Network::None && !network_namespace) {
        why = "network = none needs a network namespace, which this daemon cannot create here";
        return false;
    }
    if (p.confines_filesystem() && !mount_namespace) {
        why = "the file system settings need a mount namespace, which this daemon cannot create here";
        return false;
    }
    if (p.filesystem == SandboxProfile::Filesystem::ReadOnly) {
        if (!mount_setattr || !open_tree) {
            why = "filesystem = read-only needs mount_setattr and open_tree (Linux 5.12)";
            return false;
        }
        if (landlock_abi < 1) {
            why = "filesystem = read-only needs Landlock (Linux 5.13, enabled in the lsm= list)";
            return false;
        }
        if (p.writable.size() > 64) {
            why = "at most 64 writable paths";
            return false;
        }
    }
    for (const auto* list : {&p.writable, &p.hidden})
        for (const auto& path : *list)
            if (path.empty() || path.front() != '/') {
                why = "writable and hidden paths must be absolute: \"" + path + "\"";
                return false;
            }
    return true;
}

}  // namespace ptyvisor::backends::direct
