#include "backends/direct/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/sched.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <algorithm>
#include <vector>

#include "backends/direct/raw_syscall.h"
#include "backends/direct/sandbox_setup.h"
#include "common/linux.h"
#include "common/scheduling.h"

namespace ptyvisor::backends::direct {
namespace {

// Whether the child may share the daemon's address space (spawn.h). Sanitizers keep their
// own per-thread state and shadow memory, which a second process on our memory would
// corrupt; and the trampoline below exists for x86-64 only.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define PTYVISOR_SHARED_SPAWN 1
#endif

constexpr std::size_t kChildStackBytes = 64 * 1024;

// What the child tells the parent when it fails: the step and errno.
enum class Step : int {
    Cgroup = 1, Setsid, ControllingTty, Stdio, Groups, Gid, Uid, Chdir, Exec, BoundingSet, NoNewPrivs, Nice,
    CgroupV1, Sandbox
};

struct Failure {
    int step;
    int error;
    int detail;  // Step::Sandbox: the SandboxStep
};

constexpr std::size_t kMaxV1Cgroups = 8;

// Everything the child reads, in its ChildMemory.
struct Plan {
    int status_fd;
    int tty;
    int cwd;
    int cgroup_dir;  // for fork_into only
    int v1_cgroups[kMaxV1Cgroups];  // the session's v1 directories (cgroup_limits.h)
    std::size_t v1_count;
    bool sandboxed;                 // enter_sandbox() has work to do
    bool own_cwd;                   // enter_sandbox() has put us in the working directory
    SandboxPlan sandbox;
    int nice;
    uid_t uid;
    gid_t gid;
    std::size_t group_count;
    const gid_t* groups;
    char* const* candidates;  // files to try for argv[0], in execvp's order
    char* const* argv;
    char* const* envp;
    struct rlimit nofile;
    bool has_limits;
    struct rlimit limits[RLIM_NLIMITS];  // the agent's (SessionSpec::limits), when has_limits
};

[[noreturn]] void child_fail(const Plan& p, Step step, long result, int detail = 0) {
    const Failure f{static_cast<int>(step), static_cast<int>(-result), detail};
    sys(SYS_write, p.status_fd, arg(&f), sizeof f);
    sys(SYS_exit_group, 127);
    __builtin_unreachable();
}

// Back to the default action for every signal; then nothing blocked. Dispositions first: a
// child on the daemon's memory must never run one of the daemon's handlers.
void reset_signals() {
#if defined(__x86_64__)
    struct {
        unsigned long handler, flags, restorer, mask;
    } const dfl{};  // SIG_DFL, the kernel's layout on x86-64
    for (long sig = 1; sig <= 64; ++sig) sys(SYS_rt_sigaction, sig, arg(&dfl), 0, 8);
#else
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
#endif
    const std::uint64_t none = 0;
    sys(SYS_rt_sigprocmask, SIG_SETMASK, arg(&none), 0, 8);
}

long dup_onto(int fd, int target) {
#ifdef SYS_dup2
    return sys(SYS_dup2, fd, target);
#else
    return fd == target ? 0 : sys(SYS_dup3, fd, target, 0);
#endif
}

// Drops every capability from the bounding set. The kernel answers EINVAL past its last
// capability, which ends the walk; the first capability must exist.
void drop_bounding_set(const Plan& p) {
    for (long cap = 0; cap < 64; ++cap) {
        const long r = sys(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0);
        if (r == 0) continue;
        if (r == -EINVAL && cap > 0) return;
        child_fail(p, Step::BoundingSet, r);
    }
}

// The session's CPU priority is the agent's, never above it: the nice value of session_nice()
// and the kernel's default slice, where the daemon's loop thread (whose attributes a child
// inherits) runs at a lower nice value with a short slice (common/scheduling.h). Only when
// something differs: a daemon that kept its own has nothing to give back, and then needs no
// sched_setattr or setpriority (which a seccomp filter like systemd's ~@resources forbids).
void restore_scheduling(const Plan& p) {
    SchedAttr now{};
    const bool known = sys(SYS_sched_getattr, 0, arg(&now), sizeof now, 0) == 0;
    const bool custom_slice = known && now.runtime != 0;  // 0: the default slice
    const bool normal_policy = !known || now.policy == SCHED_OTHER || now.policy == SCHED_BATCH || now.policy == SCHED_IDLE;
    const bool same_nice = 20 - sys(SYS_getpriority, PRIO_PROCESS, 0) == p.nice;
    if (!custom_slice && normal_policy && same_nice) return;
    SchedAttr want{};
    want.size = sizeof want;
    want.policy = known && normal_policy ? now.policy : SCHED_OTHER;
    want.nice = p.nice;
    long r = sys(SYS_sched_setattr, 0, arg(&want), 0);
    // A kernel or filter without sched_setattr has set no slice: the nice value is all.
    if ((r == -ENOSYS || r == -EPERM) && !custom_slice && normal_policy) r = sys(SYS_setpriority, PRIO_PROCESS, 0, p.nice);
    if (r < 0) child_fail(p, Step::Nice, r);
}

// Runs in the child: never returns. Raw system calls only (see sys()).
[[noreturn]] void become_session(const Plan& p) {
    // Into the v1 hierarchies' session directories first, before anything can fork: the
    // limits and the accounting hold from here on. ("0" is this process.)
    for (std::size_t i = 0; i < p.v1_count; ++i) {
        const long procs = sys(SYS_openat, p.v1_cgroups[i], arg("cgroup.procs"), O_WRONLY | O_CLOEXEC);
        if (procs < 0) child_fail(p, Step::CgroupV1, procs);
        if (const long r = sys(SYS_write, procs, arg("0"), 1); r != 1) child_fail(p, Step::CgroupV1, r < 0 ? r : -EIO);
        sys(SYS_close, procs);
    }
    // The agent's limits, while still root (raising one back needs it): never the daemon's,
    // which has raised its descriptor limit and runs with root's. Else the usual descriptor
    // limit back.
    if (p.has_limits) {
        // Within what the daemon has: raising a hard limit needs CAP_SYS_RESOURCE, which a
        // confined daemon may lack, and a lower one is never more than the agent's.
        for (long r = 0; r < RLIM_NLIMITS; ++r) {
            struct rlimit now{}, wanted = p.limits[r];
            if (sys(SYS_prlimit64, 0, r, 0, arg(&now)) < 0) continue;
            if (wanted.rlim_max > now.rlim_max) wanted.rlim_max = now.rlim_max;
            if (wanted.rlim_cur > wanted.rlim_max) wanted.rlim_cur = wanted.rlim_max;
            sys(SYS_prlimit64, 0, r, arg(&wanted), 0);
        }
    } else {
        sys(SYS_prlimit64, 0, RLIMIT_NOFILE, arg(&p.nofile), 0);
    }
    restore_scheduling(p);
    // The daemon blocks signals for sd-event; the command must start with a clean slate.
    reset_signals();

    if (const long r = sys(SYS_setsid); r < 0) child_fail(p, Step::Setsid, r);
    if (const long r = sys(SYS_ioctl, p.tty, TIOCSCTTY, 0); r < 0) child_fail(p, Step::ControllingTty, r);
    for (int target = 0; target < 3; ++target)
        if (const long r = dup_onto(p.tty, target); r < 0) child_fail(p, Step::Stdio, r);
    // Nothing of the daemon's may leak into the session, whatever flags it was opened with.
    sys(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
    // Never more powerful than the agent: empty the bounding set while we are still root
    // (dropping needs CAP_SETPCAP), so that no file capability can grant anything after the
    // switch below, and set no_new_privs, so that setuid/setgid bits and file capabilities
    // are ignored by every execve of the session and its descendants (sudo, su, ping...).
    drop_bounding_set(p);
    // The profile's namespaces and Landlock, while we are still root and before exec: the
    // session gets them and can loosen none of them (sandbox_setup.h).
    if (p.sandboxed) {
        SandboxStep step{};
        if (const long r = enter_sandbox(p.sandbox, p.cwd, step); r < 0)
            child_fail(p, Step::Sandbox, r, static_cast<int>(step));
    }
    // Raw system calls, not glibc's setgroups/setresgid/setresuid: glibc's wrappers would
    // signal each of the daemon's threads to change its credentials too and wait, on a futex,
    // for answers that never come (CrashSafety caught a child that hung there before exec,
    // holding a copy of every descriptor of the daemon). This process has one thread, so the
    // per-thread system call is the whole change. The switch also makes this process's
    // memory not dumpable, so the account cannot ptrace it (or, sharing it, the daemon).
    if (const long r = sys(SYS_setgroups, static_cast<long>(p.group_count), arg(p.groups)); r < 0)
        child_fail(p, Step::Groups, r);
    if (const long r = sys(SYS_setresgid, p.gid, p.gid, p.gid); r < 0) child_fail(p, Step::Gid, r);
    if (const long r = sys(SYS_setresuid, p.uid, p.uid, p.uid); r < 0) child_fail(p, Step::Uid, r);
    if (const long r = sys(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); r < 0) child_fail(p, Step::NoNewPrivs, r);
    // In a private mount namespace the descriptor names the host's mount: enter_sandbox() has
    // already moved us into the namespace's own (and, under read-only, writable) copy.
    if (!p.own_cwd)
        if (const long r = sys(SYS_fchdir, p.cwd); r < 0) child_fail(p, Step::Chdir, r);
    // Nothing of the daemon's is held from here on but the status pipe: an exec that never
    // returns (a command on a FUSE mount whose server never answers) held copies of the
    // listener, of other sessions' terminals and logs, for as long as it hung.
    if (p.status_fd > 3) sys(SYS_close_range, 3, p.status_fd - 1, 0);
    sys(SYS_close_range, p.status_fd + 1, ~0U, 0);
    long first_error = -ENOENT;
    for (char* const* file = p.candidates; *file; ++file) {
        const long r = sys(SYS_execve, arg(*file), arg(p.argv), arg(p.envp));
        // Like execvp: remember a more telling error than "not found" (EACCES) if one came.
        if (r != -ENOENT && r != -ENOTDIR) first_error = r;
    }
    child_fail(p, Step::Exec, first_error);
}

[[maybe_unused]] int child_entry(void* plan) { become_session(*static_cast<const Plan*>(plan)); }

std::string path_of(const std::vector<std::string>& env) {
    for (const auto& e : env)
        if (e.rfind("PATH=", 0) == 0) return e.substr(5);
    return "/usr/local/bin:/usr/bin:/bin";
}

// Candidate files for argv[0], in the order execvp would try them.
std::vector<std::string> exec_candidates(const std::string& name, const std::vector<std::string>& env) {
    if (name.find('/') != std::string::npos) return {name};
    std::vector<std::string> out;
    const std::string path = path_of(env);
    std::size_t at = 0;
    while (at <= path.size()) {
        const auto end = path.find(':', at);
        std::string file = path.substr(at, end == std::string::npos ? std::string::npos : end - at);
        if (file.empty()) file.push_back('.');
        file.push_back('/');
        file.append(name);
        out.push_back(std::move(file));
        if (end == std::string::npos) break;
        at = end + 1;
    }
    return out;
}

// Lays out a ChildMemory: [guard page][stack][Plan, arrays, strings].
class PlanWriter {
public:
    static std::size_t strings_bytes(const std::vector<std::string>& v) {
        std::size_t n = (v.size() + 1) * sizeof(char*) + alignof(char*);
        for (const auto& s : v) n += s.size() + 1;
        return n;
    }

    explicit PlanWriter(char* data) : at_(data) {}

    template <typename T>
    T* take(std::size_t count) {
        const auto a = reinterpret_cast<std::uintptr_t>(at_);
        at_ = reinterpret_cast<char*>((a + alignof(T) - 1) & ~(alignof(T) - 1));
        T* p = reinterpret_cast<T*>(at_);
        at_ += count * sizeof(T);
        return p;
    }

    char* const* strings(const std::vector<std::string>& v) {
        char** array = take<char*>(v.size() + 1);
        for (std::size_t i = 0; i < v.size(); ++i) {
            char* s = take<char>(v[i].size() + 1);
            std::memcpy(s, v[i].c_str(), v[i].size() + 1);
            array[i] = s;
        }
        array[v.size()] = nullptr;
        return array;
    }

private:
    char* at_;
};

// Maps the child's memory and writes its Plan there; nullptr with errno on failure.
Plan* write_plan(const SessionSpec& spec, int status_fd, int cgroup_dir, const std::vector<int>& v1_cgroups,
                 int landlock_abi, ChildMemory& memory) {
    static const std::vector<std::string> none;
    const auto& profile = spec.profile;
    const auto& writable = profile ? profile->writable : none;
    const auto& hidden = profile ? profile->hidden : none;
    const auto candidates = exec_candidates(spec.argv.front(), spec.env);
    const auto& groups = spec.account.groups;
    const std::size_t data = sizeof(Plan) + alignof(Plan) + (groups.size() + 1) * sizeof(gid_t) +
                             PlanWriter::strings_bytes(candidates) + PlanWriter::strings_bytes(spec.argv) +
                             PlanWriter::strings_bytes(spec.env) + PlanWriter::strings_bytes(writable) +
                             PlanWriter::strings_bytes(hidden);
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t size = page + kChildStackBytes + (data + page - 1) / page * page;
    void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    memory = ChildMemory(base, size, false);
    // The bottom page stays inaccessible: a stack overflow faults instead of writing below.
    if (::mprotect(base, page, PROT_NONE) < 0) return nullptr;

    PlanWriter w(static_cast<char*>(base) + page + kChildStackBytes);
    Plan* plan = w.take<Plan>(1);
    *plan = Plan{};
    plan->status_fd = status_fd;
    plan->tty = spec.tty.get();
    plan->cwd = spec.cwd;
    plan->cgroup_dir = cgroup_dir;
    plan->v1_count = std::min(v1_cgroups.size(), kMaxV1Cgroups);
    std::copy_n(v1_cgroups.begin(), plan->v1_count, plan->v1_cgroups);
    if (profile) {
        auto& sb = plan->sandbox;
        sb.new_network = profile->network == SandboxProfile::Network::None;
        sb.new_mounts = profile->confines_filesystem();
        sb.read_only = profile->filesystem == SandboxProfile::Filesystem::ReadOnly;
        sb.writable_cwd = profile->writable_cwd;
        sb.landlock_abi = landlock_abi;
        plan->sandboxed = sb.new_network || sb.new_mounts;
        plan->own_cwd = sb.new_mounts;
    }
    plan->nice = session_nice();
    plan->uid = spec.account.uid;
    plan->gid = spec.account.gid;
    plan->group_count = groups.size();
    gid_t* g = w.take<gid_t>(groups.size() + 1);
    std::copy(groups.begin(), groups.end(), g);
    plan->groups = g;
    plan->candidates = w.strings(candidates);
    plan->argv = w.strings(spec.argv);
    plan->envp = w.strings(spec.env);
    plan->sandbox.writable = w.strings(writable);
    plan->sandbox.hidden = w.strings(hidden);
    plan->nofile = original_nofile_limit();
    plan->has_limits = spec.limits.has_value();
    if (spec.limits)
        for (std::size_t r = 0; r < RLIM_NLIMITS; ++r) plan->limits[r] = (*spec.limits)[r];
    return plan;
}

#ifdef PTYVISOR_SHARED_SPAWN
// clone3 onto a new stack: returns the child's PID (or -errno) in the parent; the child runs
// fn(arg) on the stack clone3 gave it and exits with its result. In assembly because the
// child must not return through a C++ frame of the parent's stack.
extern "C" long ptyvisor_clone3_on_stack(clone_args* args, std::size_t size, int (*fn)(void*), void* arg);
asm(R"(
    .text
    .globl ptyvisor_clone3_on_stack
    .hidden ptyvisor_clone3_on_stack
    .type ptyvisor_clone3_on_stack, @function
ptyvisor_clone3_on_stack:
    .cfi_startproc
    mov %rdx, %r8
    mov %rcx, %r9
    mov $435, %eax
    syscall
    test %rax, %rax
    jz 1f
    ret
1:
    .cfi_undefined rip
    xor %ebp, %ebp
    mov %r9, %rdi
    call *%r8
    mov %eax, %edi
    mov $231, %eax
    syscall
    hlt
    .cfi_endproc
    .size ptyvisor_clone3_on_stack, .-ptyvisor_clone3_on_stack
)");
static_assert(SYS_clone3 == 435 && SYS_exit_group == 231, "x86-64 system call numbers");

// The child runs on `memory`, sharing our address space, born inside `cgroup_dir` when that
// is a cgroup directory fd, with a pidfd. Returns the PID or -errno.
long clone_sharing_memory(ChildMemory& memory, Plan* plan, int cgroup_dir, int& pidfd) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    clone_args args{};
    args.flags = CLONE_VM | CLONE_PIDFD | (cgroup_dir >= 0 ? CLONE_INTO_CGROUP : 0);
    args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    args.stack = reinterpret_cast<std::uint64_t>(static_cast<char*>(memory.base()) + page);
    args.stack_size = kChildStackBytes;
    args.cgroup = cgroup_dir >= 0 ? static_cast<std::uint64_t>(cgroup_dir) : 0;
    return ptyvisor_clone3_on_stack(&args, sizeof args, child_entry, plan);
}
#endif

// fork(), but born inside `cgroup_dir` when that is a cgroup directory fd, with a pidfd.
// Being born there (CLONE_INTO_CGROUP) avoids migrating a live process, which costs
// milliseconds of RCU synchronisation per session, and no instant exists at which the
// session's first process is outside its cgroup. Returns the PID, 0 in the child, or -errno.
[[maybe_unused]] long clone_into(int cgroup_dir, int& pidfd) {
    clone_args args{};
    args.flags = CLONE_PIDFD | (cgroup_dir >= 0 ? CLONE_INTO_CGROUP : 0);
    args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    args.cgroup = cgroup_dir >= 0 ? static_cast<std::uint64_t>(cgroup_dir) : 0;
    return sys(SYS_clone3, arg(&args), sizeof args);
}

// Where clone3 is filtered (seccomp returns ENOSYS, as systemd's @system-service does):
// fork, and the child joins its cgroup itself before anything else, so that no process of
// the session ever runs outside it. Returns the PID, 0 in the child, or -errno.
long fork_into(const Plan& plan, int& pidfd) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (plan.cgroup_dir >= 0) {
            const long procs = sys(SYS_openat, plan.cgroup_dir, arg("cgroup.procs"), O_WRONLY | O_CLOEXEC);
            if (procs < 0) child_fail(plan, Step::Cgroup, procs);
            if (const long r = sys(SYS_write, procs, arg("0"), 1); r != 1) child_fail(plan, Step::Cgroup, r < 0 ? r : -EIO);
            sys(SYS_close, procs);
        }
        return 0;
    }
    if (pid < 0) return -errno;
    pidfd = pidfd_open(pid);  // unreaped, so the PID is still this child's
    return pid;
}

}  // namespace

ChildMemory& ChildMemory::operator=(ChildMemory&& o) noexcept {
    if (this != &o) {
        this->~ChildMemory();
        base_ = std::exchange(o.base_, nullptr);
        size_ = std::exchange(o.size_, 0);
        shared_ = std::exchange(o.shared_, false);
    }
    return *this;
}

ChildMemory::~ChildMemory() {
    // A child that may still run on this memory keeps it: unmapping it under a process
    // that shares our address space would have it run on whatever is mapped there next.
    if (base_ && !shared_) ::munmap(base_, size_);
}

void ChildMemory::child_done() {
    if (base_) ::munmap(base_, size_);
    base_ = nullptr;
}

Spawned spawn_session(const SessionSpec& spec, int cgroup_dir, const std::vector<int>& v1_cgroups, int landlock_abi,
                      std::string& why) {
    if (v1_cgroups.size() > kMaxV1Cgroups) {
        why = "too many cgroup v1 hierarchies";
        return {};
    }
    Spawned out;
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
        why = std::string("pipe: ") + std::strerror(errno);
        return out;
    }
    UniqueFd status_read(pipefd[0]), status_write(pipefd[1]);
    // The child writes a few bytes at most: a blocking write end is fine and simpler.
    ::fcntl(status_write.get(), F_SETFL, 0);

    ChildMemory memory;
    Plan* plan = write_plan(spec, status_write.get(), cgroup_dir, v1_cgroups, landlock_abi, memory);
    if (!plan) {
        why = std::string("cannot map the child's memory: ") + std::strerror(errno);
        return out;
    }

    int pidfd = -1;
    long pid = -ENOSYS;
#ifdef PTYVISOR_SHARED_SPAWN
    pid = clone_sharing_memory(memory, plan, cgroup_dir, pidfd);
    if (pid > 0) memory.mark_shared();
#else
    pid = clone_into(cgroup_dir, pidfd);
    if (pid == 0) become_session(*plan);
#endif
    if (pid == -ENOSYS || pid == -EPERM) pid = fork_into(*plan, pidfd);
    if (pid == 0) become_session(*plan);
    if (pid < 0) {
        why = std::string("clone3: ") + std::strerror(static_cast<int>(-pid));
        return out;
    }
    out.memory = std::move(memory);
    out.pidfd.reset(pidfd);
    if (!out.pidfd) {
        why = std::string("pidfd_open: ") + std::strerror(errno);
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
        out.memory.child_done();
        return out;
    }
    out.pid = static_cast<pid_t>(pid);
    out.exec_status = std::move(status_read);
    return out;
}

std::string describe_exec_failure(const unsigned char* data, std::size_t size, const std::string& command) {
    Failure f{};
    if (size < sizeof f) return "the session process failed before exec";
    std::memcpy(&f, data, sizeof f);
    const std::string err = std::strerror(f.error);
    switch (static_cast<Step>(f.step)) {
        case Step::Cgroup: return "cannot join the session cgroup: " + err;
        case Step::Setsid: return "setsid: " + err;
        case Step::ControllingTty: return "cannot acquire the terminal: " + err;
        case Step::Stdio: return "cannot attach the terminal: " + err;
        case Step::Groups:
        case Step::Gid:
        case Step::Uid: return "cannot switch to the account: " + err;
        case Step::Chdir: return "cannot enter the working directory: " + err;
        case Step::BoundingSet: return "cannot drop the capability bounding set: " + err;
        case Step::NoNewPrivs: return "cannot set no_new_privs: " + err;
        case Step::Nice: return "cannot restore the scheduling priority: " + err;
        case Step::CgroupV1: return "cannot join the session's cgroup v1 directories: " + err;
        case Step::Sandbox: return std::string(describe(static_cast<SandboxStep>(f.detail))) + ": " + err;
        case Step::Exec:
            if (f.error == ENOENT) return "command not found: " + command;
            return "cannot execute " + command + ": " + err;
    }
    return "the session process failed: " + err;
}

}  // namespace ptyvisor::backends::direct
