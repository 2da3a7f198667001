#include "server/input_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"

namespace ptyvisor::server {
namespace {

using State = InputWait::State;

// The longest /proc/PID/stat line is about 350 bytes (the name is at most 16).
constexpr std::size_t kStatBufferSize = 1024;
// An epoll's fdinfo: about 100 bytes per watched fd, kMaxWatchedFds of them, plus the header.
constexpr std::size_t kEpollInfoLimit = 128 * 1024;

// Reads at most `capacity` bytes of a /proc file (relative to `proc`) into `out`; false if it
// cannot be opened or read (the task exited, or never existed).
bool read_proc_file(int proc, const char* path, char* out, std::size_t capacity, std::size_t& length) {
    UniqueFd fd(::openat(proc, path, O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return false;
    length = 0;
    while (length < capacity) {
        const ssize_t n = ::read(fd.get(), out + length, capacity - length);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        if (n == 0) break;
        length += static_cast<std::size_t>(n);
    }
    return true;
}

template <typename Int>
bool parse_int(std::string_view text, Int& value, int base = 10) {
    if (base == 16 && text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
    return ec == std::errc() && end == text.data() + text.size();
}

// Splits `text` at spaces (and the final newline) into at most `N` fields; returns the count.
template <std::size_t N>
std::size_t split_fields(std::string_view text, std::array<std::string_view, N>& fields) {
    std::size_t count = 0;
    std::size_t i = 0;
    while (count < N) {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\n')) ++i;
        if (i >= text.size()) break;
        const std::size_t start = i;
        while (i < text.size() && text[i] != ' ' && text[i] != '\n') ++i;
        fields[count++] = text.substr(start, i - start);
    }
    return count;
}

// The fields of /proc/PID/stat the probe uses.
struct ProcStat {
    char state = '?';
    pid_t pgrp = 0;
    dev_t controlling_tty = 0;  // as st_rdev; 0 if none
    long threads = 0;
};

// Decodes the kernel's tty_nr (new_encode_dev) into a dev_t comparable with st_rdev.
dev_t decode_tty_nr(unsigned int tty_nr) {
    const unsigned int major_number = (tty_nr >> 8) & 0xfffu;
    const unsigned int minor_number = (tty_nr & 0xffu) | ((tty_nr >> 12) & 0xfff00u);
    return makedev(major_number, minor_number);
}

// "pid (name) state ppid pgrp session tty_nr tpgid flags ... num_threads ...": the name may hold
// spaces and parentheses, so the fields start after the last ')'.
std::optional<ProcStat> parse_stat(std::string_view line) {
    const std::size_t close = line.rfind(')');
    if (close == std::string_view::npos) return std::nullopt;
    std::array<std::string_view, 18> fields;  // state (field 3) .. num_threads (field 20)
    if (split_fields(line.substr(close + 1), fields) < fields.size() || fields[0].size() != 1) return std::nullopt;
    ProcStat stat;
    stat.state = fields[0][0];
    unsigned int tty_nr = 0;
    int tty_signed = 0;
    if (!parse_int(fields[2], stat.pgrp) || !parse_int(fields[4], tty_signed) || !parse_int(fields[17], stat.threads))
        return std::nullopt;
    tty_nr = static_cast<unsigned int>(tty_signed);
    stat.controlling_tty = tty_nr == 0 ? 0 : decode_tty_nr(tty_nr);
    return stat;
}

std::optional<ProcStat> read_stat(int proc, const char* path) {
    char buffer[kStatBufferSize];
    std::size_t length = 0;
    if (!read_proc_file(proc, path, buffer, sizeof buffer, length)) return std::nullopt;
    return parse_stat(std::string_view(buffer, length));
}

// /proc/PID/task/TID/syscall: "running", "-1 SP PC" (asleep outside a system call), or
// "NR ARG1 .. ARG6 SP PC" with NR in decimal and the rest in hex.
struct SyscallLine {
    bool running = false;
    long number = -1;
    std::array<std::uint64_t, 6> args{};
    std::uint64_t stack_pointer = 0;
};

std::optional<SyscallLine> parse_syscall(std::string_view text) {
    SyscallLine line;
    std::array<std::string_view, 9> fields;
    const std::size_t count = split_fields(text, fields);
    if (count == 1 && fields[0] == "running") {
        line.running = true;
        return line;
    }
    if (count < 3 || !parse_int(fields[0], line.number)) return std::nullopt;
    if (line.number < 0) return count == 3 && parse_int(fields[1], line.stack_pointer, 16) ? std::optional(line) : std::nullopt;
    if (count != 9) return std::nullopt;
    for (std::size_t i = 0; i < 6; ++i)
        if (!parse_int(fields[1 + i], line.args[i], 16)) return std::nullopt;
    if (!parse_int(fields[7], line.stack_pointer, 16)) return std::nullopt;
    return line;
}

// What the probe makes of one task.
enum class Verdict {
    Working,         // running, or asleep in something that is not input
    ReadsTerminal,   // asleep waiting for the terminal to become readable
    WaitsOnProcess,  // asleep waiting for something else: a child, a pipe, a futex, another event loop
    Gone,            // a zombie, or exited mid-probe
    Unknown,         // /proc said nothing usable
};

struct TaskFinding {
    Verdict verdict = Verdict::Unknown;
    std::string why;
};

enum class FdKind { Terminal, Pipe, Other, Unreadable };

const char* syscall_name(long number) {
    switch (number) {
        case SYS_read: return "read";
        case SYS_readv: return "readv";
        case SYS_write: return "write";
        case SYS_writev: return "writev";
#ifdef SYS_poll
        case SYS_poll: return "poll";
#endif
        case SYS_ppoll: return "ppoll";
#ifdef SYS_select
        case SYS_select: return "select";
#endif
        case SYS_pselect6: return "pselect6";
#ifdef SYS_epoll_wait
        case SYS_epoll_wait: return "epoll_wait";
#endif
        case SYS_epoll_pwait: return "epoll_pwait";
#ifdef SYS_epoll_pwait2
        case SYS_epoll_pwait2: return "epoll_pwait2";
#endif
        case SYS_wait4: return "wait4";
        case SYS_waitid: return "waitid";
        case SYS_futex: return "futex";
#ifdef SYS_futex_waitv
        case SYS_futex_waitv: return "futex_waitv";
#endif
#ifdef SYS_nanosleep
        case SYS_nanosleep: return "nanosleep";
#endif
        case SYS_clock_nanosleep: return "clock_nanosleep";
        case SYS_rt_sigsuspend: return "rt_sigsuspend";
        case SYS_rt_sigtimedwait: return "rt_sigtimedwait";
#ifdef SYS_pause
        case SYS_pause: return "pause";
#endif
        case SYS_recvfrom: return "recvfrom";
        case SYS_recvmsg: return "recvmsg";
        case SYS_accept4: return "accept4";
        default: return nullptr;
    }
}

std::string describe_syscall(long number) {
    if (const char* name = syscall_name(number)) return name;
    return "system call " + std::to_string(number);
}

// Examines the tasks of one foreground group against one terminal.
class GroupProbe {
public:
    GroupProbe(int proc, const TerminalIdentity& terminal) : proc_(proc), terminal_(terminal) {}

    TaskFinding examine(pid_t pid, pid_t tid, char state, dev_t controlling_tty) {
        pid_ = pid;
        tid_ = tid;
        controlling_tty_ = controlling_tty;
        switch (state) {
            case 'S': break;
            case 'Z': case 'X': case 'x': return {Verdict::Gone, ""};
            case 'R': case 'D': return {Verdict::Working, who() + " state " + state};
            case 'T': case 't': return {Verdict::Working, who() + " stopped (state " + state + ")"};
            default: return {Verdict::Unknown, who() + " state " + state};
        }
        char path[64];
        std::snprintf(path, sizeof path, "%d/task/%d/syscall", pid, tid);
        char buffer[256];
        std::size_t length = 0;
        if (!read_proc_file(proc_, path, buffer, sizeof buffer, length)) return {Verdict::Gone, ""};
        const std::optional<SyscallLine> call = parse_syscall(std::string_view(buffer, length));
        if (!call) return {Verdict::Unknown, who() + ": unreadable syscall line"};
        if (call->running) return {Verdict::Working, who() + " running"};
        if (call->number < 0) return {Verdict::Working, who() + " asleep outside a system call"};
        // A 32-bit task's system call numbers are not ours; its stack lies below 4 GiB.
        if (sizeof(void*) == 8 && call->stack_pointer <= 0xffffffffu)
            return {Verdict::Unknown, who() + ": a 32-bit task (stack below 4 GiB)"};
        return classify_call(*call);
    }

private:
    std::string who() const {
        std::string text = "pid " + std::to_string(pid_);
        if (tid_ != pid_) text += " (thread " + std::to_string(tid_) + ")";
        return text;
    }

    TaskFinding classify_call(const SyscallLine& call) {
        const long number = call.number;
        const std::string name = describe_syscall(number);
        switch (number) {
            case SYS_read: case SYS_readv: case SYS_write: case SYS_writev: {
                const bool reads = number == SYS_read || number == SYS_readv;
                const auto fd = static_cast<std::int64_t>(call.args[0]);
                const std::string call_text = who() + " in " + name + "(" + std::to_string(fd) + ")";
                switch (classify_fd(fd)) {
                    case FdKind::Terminal:
                        return reads ? TaskFinding{Verdict::ReadsTerminal, call_text + " on the terminal"}
                                     : TaskFinding{Verdict::Working, call_text + " on the terminal"};
                    case FdKind::Pipe: return {Verdict::WaitsOnProcess, call_text + " on a pipe"};
                    case FdKind::Unreadable: return {Verdict::Gone, ""};
                    case FdKind::Other: return {Verdict::Working, call_text + " on something else"};
                }
                return {Verdict::Unknown, call_text};
            }
#ifdef SYS_poll
            case SYS_poll:
#endif
            case SYS_ppoll:
                return watched_verdict(name, poll_watches_terminal(call.args[0], call.args[1]));
#ifdef SYS_select
            case SYS_select:
#endif
            case SYS_pselect6:
                return watched_verdict(name, select_watches_terminal(call.args[0], call.args[1]));
#ifdef SYS_epoll_wait
            case SYS_epoll_wait:
#endif
#ifdef SYS_epoll_pwait2
            case SYS_epoll_pwait2:
#endif
            case SYS_epoll_pwait:
                return watched_verdict(name, epoll_watches_terminal(call.args[0]));
            case SYS_wait4:
            case SYS_waitid:
            case SYS_futex:
#ifdef SYS_futex_waitv
            case SYS_futex_waitv:
#endif
            case SYS_rt_sigsuspend:
#ifdef SYS_pause
            case SYS_pause:
#endif
                return {Verdict::WaitsOnProcess, who() + " in " + name};
            case SYS_rt_sigtimedwait:
                // Without a timeout, a signal from elsewhere (glibc's timer thread waits so);
                // with one, a timed sleep.
                if (call.args[2] == 0) return {Verdict::WaitsOnProcess, who() + " in " + name};
                return {Verdict::Working, who() + " in " + name + " with a timeout"};
            default: return {Verdict::Working, who() + " in " + name};
        }
    }

    enum class Watch { Terminal, NotTerminal, Unknown };

    TaskFinding watched_verdict(const std::string& name, Watch watch) const {
        switch (watch) {
            case Watch::Terminal: return {Verdict::ReadsTerminal, who() + " in " + name + " on the terminal"};
            // Another event loop of the program (node's and libuv's helper threads wait so):
            // not work, and not input either. Alone, it leaves no task reading: Busy.
            case Watch::NotTerminal: return {Verdict::WaitsOnProcess, who() + " in " + name + " without the terminal"};
            case Watch::Unknown: break;
        }
        return {Verdict::Unknown, who() + " in " + name + ": its watched set could not be read"};
    }

    // statx of the task's fd, following the /proc magic link to the file itself. DONT_SYNC and
    // the type alone keep a network or FUSE file system from asking its server.
    FdKind classify_fd(std::int64_t fd, std::uint64_t expected_inode = 0) const {
        if (fd < 0 || fd > INT32_MAX) return FdKind::Other;
        char path[80];
        std::snprintf(path, sizeof path, "%d/task/%d/fd/%lld", pid_, tid_, static_cast<long long>(fd));
        struct statx file{};
        if (::statx(proc_, path, AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &file) != 0)
            return errno == ENOENT || errno == ESRCH ? FdKind::Unreadable : FdKind::Other;
        if (expected_inode != 0 && file.stx_ino != expected_inode) return FdKind::Other;
        if (S_ISFIFO(file.stx_mode)) return FdKind::Pipe;
        if (!S_ISCHR(file.stx_mode)) return FdKind::Other;
        const dev_t rdev = makedev(file.stx_rdev_major, file.stx_rdev_minor);
        if (rdev == terminal_.rdev && makedev(file.stx_dev_major, file.stx_dev_minor) == terminal_.dev)
            return FdKind::Terminal;
        // /dev/tty opened by a process of this session: its controlling terminal, this one.
        if (rdev == makedev(5, 0) && controlling_tty_ == terminal_.rdev) return FdKind::Terminal;
        return FdKind::Other;
    }

    bool read_remote(std::uint64_t address, void* out, std::size_t size) const {
        iovec local{out, size};
        iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), size};
        const ssize_t n = ::process_vm_readv(tid_, &local, 1, &remote, 1, 0);
        return n == static_cast<ssize_t>(size);
    }

    Watch poll_watches_terminal(std::uint64_t address, std::uint64_t count) const {
        if (count > kMaxWatchedFds) return Watch::Unknown;
        if (count == 0) return Watch::NotTerminal;
        std::vector<pollfd> fds(count);
        if (!read_remote(address, fds.data(), count * sizeof(pollfd))) return Watch::Unknown;
        for (const pollfd& entry : fds) {
            if (entry.fd < 0 || (entry.events & (POLLIN | POLLRDNORM)) == 0) continue;
            if (classify_fd(entry.fd) == FdKind::Terminal) return Watch::Terminal;
        }
        return Watch::NotTerminal;
    }

    Watch select_watches_terminal(std::uint64_t count, std::uint64_t read_set) const {
        const auto nfds = static_cast<std::int64_t>(static_cast<std::int32_t>(count));  // select's nfds is an int
        if (nfds < 0 || static_cast<std::uint64_t>(nfds) > kMaxWatchedFds) return Watch::Unknown;
        if (read_set == 0 || nfds == 0) return Watch::NotTerminal;
        // The kernel reads the set as longs: ceil(nfds / bits per long) of them.
        constexpr std::size_t kBitsPerWord = 8 * sizeof(unsigned long);
        const std::size_t words = (static_cast<std::size_t>(nfds) + kBitsPerWord - 1) / kBitsPerWord;
        std::array<unsigned long, kMaxWatchedFds / kBitsPerWord> bits{};
        if (!read_remote(read_set, bits.data(), words * sizeof(unsigned long))) return Watch::Unknown;
        for (std::int64_t fd = 0; fd < nfds; ++fd) {
            const auto i = static_cast<std::size_t>(fd);
            if (((bits[i / kBitsPerWord] >> (i % kBitsPerWord)) & 1u) == 0) continue;
            if (classify_fd(fd) == FdKind::Terminal) return Watch::Terminal;
        }
        return Watch::NotTerminal;
    }

    // /proc/PID/fdinfo/EPFD lists each watched file as
    // "tfd: FD events: HEX data: HEX pos:N ino:HEX sdev:HEX"; ino guards against the fd number
    // having been reused for another file since it was added.
    Watch epoll_watches_terminal(std::uint64_t epoll_fd) const {
        if (epoll_fd > INT32_MAX) return Watch::Unknown;
        char path[80];
        std::snprintf(path, sizeof path, "%d/task/%d/fdinfo/%llu", pid_, tid_, static_cast<unsigned long long>(epoll_fd));
        std::string info(kEpollInfoLimit, '\0');
        std::size_t length = 0;
        if (!read_proc_file(proc_, path, info.data(), info.size(), length)) return Watch::Unknown;
        if (length == info.size()) return Watch::Unknown;  // more than kMaxWatchedFds entries
        const std::string_view text(info.data(), length);
        std::size_t watched = 0;
        for (std::size_t start = 0; start < text.size();) {
            std::size_t end = text.find('\n', start);
            if (end == std::string_view::npos) end = text.size();
            const std::string_view line = text.substr(start, end - start);
            start = end + 1;
            if (line.substr(0, 4) != "tfd:") continue;
            if (++watched > kMaxWatchedFds) return Watch::Unknown;
            std::array<std::string_view, 12> fields;
            const std::size_t count = split_fields(line, fields);
            std::int64_t fd = -1;
            std::uint32_t events = 0;
            std::uint64_t inode = 0;
            if (count < 4 || fields[2] != "events:" || !parse_int(fields[1], fd) || !parse_int(fields[3], events, 16))
                return Watch::Unknown;
            for (std::size_t i = 4; i < count; ++i)
                if (fields[i].substr(0, 4) == "ino:" && !parse_int(fields[i].substr(4), inode, 16)) return Watch::Unknown;
            if ((events & (POLLIN | POLLRDNORM)) == 0) continue;
            if (classify_fd(fd, inode) == FdKind::Terminal) return Watch::Terminal;
        }
        return Watch::NotTerminal;
    }

    int proc_;
    const TerminalIdentity& terminal_;
    pid_t pid_ = 0;
    pid_t tid_ = 0;
    dev_t controlling_tty_ = 0;
};

struct Member {
    pid_t pid = 0;
    ProcStat stat;
};

bool all_digits(const char* name) {
    if (*name == '\0') return false;
    for (; *name != '\0'; ++name)
        if (*name < '0' || *name > '9') return false;
    return true;
}

using DirPtr = std::unique_ptr<DIR, int (*)(DIR*)>;

// Adds `pid` to `members` if it is in `group`; false if the group has more than kMaxProbedTasks
// tasks in all.
bool add_if_member(int proc, const char* pid_text, pid_t group, std::vector<Member>& members, std::size_t& threads) {
    char path[64];
    if (std::snprintf(path, sizeof path, "%s/stat", pid_text) >= static_cast<int>(sizeof path)) return true;
    const std::optional<ProcStat> stat = read_stat(proc, path);
    if (!stat || stat->pgrp != group) return true;  // not in the group, or gone
    pid_t pid = 0;
    if (!parse_int(std::string_view(pid_text), pid)) return true;
    threads += static_cast<std::size_t>(stat->threads > 0 ? stat->threads : 1);
    if (threads > kMaxProbedTasks) return false;
    members.push_back({pid, *stat});
    return true;
}

enum class Listing { Complete, TooMany, Unreadable };

// The processes of group `group`, found in one pass over /proc.
Listing host_members(int proc, pid_t group, std::vector<Member>& members) {
    const int listing_fd = ::openat(proc, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (listing_fd < 0) return Listing::Unreadable;
    DirPtr listing(::fdopendir(listing_fd), &::closedir);
    if (!listing) {
        ::close(listing_fd);
        return Listing::Unreadable;
    }
    std::size_t threads = 0;
    while (const dirent* entry = ::readdir(listing.get())) {
        if (!all_digits(entry->d_name)) continue;
        if (!add_if_member(proc, entry->d_name, group, members, threads)) return Listing::TooMany;
    }
    return Listing::Complete;
}

// The processes of group `group` among those of the cgroup `directory` and its descendants.
class CgroupListing {
public:
    CgroupListing(int proc, pid_t group, std::vector<Member>& members) : proc_(proc), group_(group), members_(members) {}

    Listing list(int directory, int depth) {
        if (++directories_ > kMaxSessionCgroups || depth > kMaxSessionCgroupDepth) return Listing::TooMany;
        if (const Listing result = list_processes(directory); result != Listing::Complete) return result;
        const int listing_fd = ::openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (listing_fd < 0) return Listing::Unreadable;
        DirPtr listing(::fdopendir(listing_fd), &::closedir);
        if (!listing) {
            ::close(listing_fd);
            return Listing::Unreadable;
        }
        while (const dirent* entry = ::readdir(listing.get())) {
            if (entry->d_type != DT_DIR || entry->d_name[0] == '.') continue;
            const UniqueFd child(::openat(directory, entry->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
            if (!child) continue;  // removed meanwhile
            if (const Listing result = list(child.get(), depth + 1); result != Listing::Complete) return result;
        }
        return Listing::Complete;
    }

private:
    Listing list_processes(int directory) {
        // cgroup.procs: one PID a line, at most kMaxSessionProcesses for the whole tree.
        std::string text(kMaxSessionProcesses * 8 + 1, '\0');
        std::size_t length = 0;
        if (!read_proc_file(directory, "cgroup.procs", text.data(), text.size(), length)) return Listing::Unreadable;
        if (length == text.size()) return Listing::TooMany;
        for (std::size_t start = 0; start < length;) {
            std::size_t end = std::string_view(text.data(), length).find('\n', start);
            if (end == std::string_view::npos) end = length;
            text[end] = '\0';
            const char* pid_text = text.data() + start;
            start = end + 1;
            if (!all_digits(pid_text)) continue;
            if (++processes_ > kMaxSessionProcesses) return Listing::TooMany;
            if (!add_if_member(proc_, pid_text, group_, members_, threads_)) return Listing::TooMany;
        }
        return Listing::Complete;
    }

    int proc_;
    pid_t group_;
    std::vector<Member>& members_;
    std::size_t threads_ = 0;
    std::size_t processes_ = 0;
    std::size_t directories_ = 0;
};

InputWait probe(int master_fd, const TerminalIdentity& terminal, int session_cgroup) {
    InputWait result;
    const std::optional<pid_t> group = foreground_group(master_fd);
    if (!group) {
        result.why = "no foreground group";
        return result;
    }
    result.foreground = *group;
    if (!terminal.known) {
        result.why = "the terminal was not identified";
        return result;
    }
    const UniqueFd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!proc) {
        result.why = "/proc cannot be opened";
        return result;
    }
    std::vector<Member> members;
    Listing listing = Listing::Unreadable;
    if (session_cgroup >= 0) listing = CgroupListing(proc.get(), *group, members).list(session_cgroup, 0);
    if (listing == Listing::Unreadable) {  // no cgroup, or it cannot be read: every process on the host
        members.clear();
        listing = host_members(proc.get(), *group, members);
    }
    if (listing != Listing::Complete) {
        result.why = listing == Listing::TooMany ? "foreground group " + std::to_string(*group) + " or its session is too large"
                                                 : std::string("/proc cannot be listed");
        return result;
    }
    GroupProbe probe(proc.get(), terminal);
    std::optional<TaskFinding> reader;
    pid_t reader_pid = 0;
    std::optional<std::string> unknown;
    std::size_t live = 0;
    const auto take = [&](pid_t pid, TaskFinding finding) -> bool {  // true: the answer is Busy
        switch (finding.verdict) {
            case Verdict::Working:
                result.state = State::Busy;
                result.why = std::move(finding.why);
                return true;
            case Verdict::ReadsTerminal:
                ++live;
                if (!reader) {
                    reader = std::move(finding);
                    reader_pid = pid;
                }
                break;
            case Verdict::WaitsOnProcess: ++live; break;
            case Verdict::Unknown:
                ++live;
                if (!unknown) unknown = std::move(finding.why);
                break;
            case Verdict::Gone: break;
        }
        return false;
    };
    std::size_t examined = 0;
    for (const Member& member : members) {
        if (member.stat.threads <= 1) {
            // The scan's stat is the only task's.
            ++examined;
            if (take(member.pid, probe.examine(member.pid, member.pid, member.stat.state, member.stat.controlling_tty)))
                return result;
            continue;
        }
        char path[64];
        std::snprintf(path, sizeof path, "%d/task", member.pid);
        const int tasks_fd = ::openat(proc.get(), path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tasks_fd < 0) continue;  // the process exited
        DirPtr tasks(::fdopendir(tasks_fd), &::closedir);
        if (!tasks) {
            ::close(tasks_fd);
            continue;
        }
        while (const dirent* entry = ::readdir(tasks.get())) {
            if (!all_digits(entry->d_name)) continue;
            pid_t tid = 0;
            if (!parse_int(std::string_view(entry->d_name), tid)) continue;
            // Threads created since the scan count against the same bound.
            if (++examined > kMaxProbedTasks) {
                result.why = "foreground group " + std::to_string(*group) + " has more than " +
                             std::to_string(kMaxProbedTasks) + " tasks";
                return result;
            }
            std::snprintf(path, sizeof path, "%d/task/%d/stat", member.pid, tid);
            const std::optional<ProcStat> stat = read_stat(proc.get(), path);
            if (!stat) continue;  // the thread exited
            if (take(member.pid, probe.examine(member.pid, tid, stat->state, member.stat.controlling_tty)))
                return result;
        }
    }
    if (unknown) {
        result.why = std::move(*unknown);
        return result;
    }
    if (reader) {
        result.state = State::Waiting;
        result.reader = reader_pid;
        result.why = std::move(reader->why);
        return result;
    }
    if (live == 0) {  // the group exited: nobody to wait for
        result.why = "foreground group " + std::to_string(*group) + " has no live task";
        return result;
    }
    result.state = State::Busy;
    result.why = "no task of foreground group " + std::to_string(*group) + " reads the terminal";
    return result;
}

}  // namespace

TerminalIdentity identify_terminal(int master_fd) {
    // O_PATH: the peer is named, not opened as a tty, so its open count and modes are untouched.
    const UniqueFd peer(::ioctl(master_fd, TIOCGPTPEER, O_PATH | O_NOCTTY | O_CLOEXEC));
    if (!peer) return {};
    struct stat st{};
    if (::fstat(peer.get(), &st) != 0 || !S_ISCHR(st.st_mode)) return {};
    return {st.st_dev, st.st_rdev, true};
}

std::optional<pid_t> foreground_group(int master_fd) {
    pid_t group = 0;
    if (::ioctl(master_fd, TIOCGPGRP, &group) != 0 || group <= 0) return std::nullopt;
    return group;
}

InputWait probe_input_wait(int master_fd, const TerminalIdentity& terminal, int session_cgroup) {
    try {
        return probe(master_fd, terminal, session_cgroup);
    } catch (...) {  // std::bad_alloc from a string or vector
        InputWait result;
        result.why = "out of memory";  // short enough to need no allocation
        return result;
    }
}

}  // namespace ptyvisor::server
