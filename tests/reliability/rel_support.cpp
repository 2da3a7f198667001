#include "rel_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/linux.h"
#include "protocol/fd_passing.h"
#include "protocol/frame.h"
#include "protocol/payloads.h"

namespace ptyvisor::itest::rel {

// --- statistics ---------------------------------------------------------------------------

std::string Latency::describe() const {
    std::ostringstream s;
    s.setf(std::ios::fixed);
    s.precision(1);
    s << "n=" << n << " p50=" << p50 << "ms p99=" << p99 << "ms max=" << max << "ms mean=" << mean
      << "ms";
    return s.str();
}

Latency summarize(std::vector<double> ms) {
    Latency l;
    l.n = ms.size();
    if (ms.empty()) return l;
    std::sort(ms.begin(), ms.end());
    // Nearest rank.
    auto rank = [&](double p) {
        const auto r = static_cast<std::size_t>(std::ceil(p * static_cast<double>(ms.size())));
        return ms[std::min(ms.size() - 1, r == 0 ? 0 : r - 1)];
    };
    l.p50 = rank(0.50);
    l.p99 = rank(0.99);
    l.max = ms.back();
    double sum = 0;
    for (const double v : ms) sum += v;
    l.mean = sum / static_cast<double>(ms.size());
    return l;
}

std::uint64_t seed(std::uint64_t fallback) {
    const char* v = std::getenv("PTYVISOR_TEST_SEED");
    if (v == nullptr || *v == '\0') return fallback;
    return std::strtoull(v, nullptr, 0);
}

bool systemd_required() {
    const char* v = std::getenv("PTYVISOR_REQUIRE_SYSTEMD");
    return v != nullptr && std::string(v) == "1";
}

// --- flooders -----------------------------------------------------------------------------

std::string to_string(FloodKind kind) {
    switch (kind) {
        case FloodKind::Hold: return "hold";
        case FloodKind::Slowloris: return "slowloris";
        case FloodKind::Garbage: return "garbage";
        case FloodKind::ConnectClose: return "connect_close";
        case FloodKind::FailAuth: return "fail_auth";
    }
    return "?";
}

std::string FloodStats::describe() const {
    std::ostringstream s;
    s << "attempts=" << attempts << " backlog_full=" << backlog_full
      << " closed_silently=" << closed_silently;
    for (const auto& [code, n] : errors) s << " " << code << "=" << n;
    return s.str();
}

namespace {

// Everything below up to Flood::start runs in a forked child of the test. The child is
// single-threaded (the test is when it forks) and only ever _exit()s.

struct Slot {
    UniqueFd fd;
    std::size_t sent = 0;  // slowloris: bytes of START sent so far
    Clock::time_point next_send{};
    std::string in;        // what the daemon sent
};

struct ChildStats {
    long attempts = 0, backlog_full = 0, closed_silently = 0;
    std::map<std::string, long> errors;
};

std::string error_code_in(const std::string& bytes) {
    // An ERROR frame's payload is {"code":"...","message":"..."}; the code is all we need.
    const auto at = bytes.find("\"code\":\"");
    if (at == std::string::npos) return {};
    const auto from = at + 8;
    const auto end = bytes.find('"', from);
    if (end == std::string::npos) return {};
    return bytes.substr(from, end - from);
}

void finish(Slot& s, ChildStats& st) {
    const std::string code = error_code_in(s.in);
    if (code.empty())
        ++st.closed_silently;
    else
        ++st.errors[code];
    s.fd.reset();
    s.in.clear();
    s.sent = 0;
}

int send_bytes(int fd, const std::uint8_t* data, std::size_t n, int pass_fd) {
    return protocol::send_once(fd, std::span(data, n), pass_fd, MSG_DONTWAIT) < 0 ? errno : 0;
}

std::vector<std::uint8_t> garbage(Rng& rng) {
    std::vector<std::uint8_t> out;
    switch (rng.below(4)) {
        case 0: {  // pure noise
            out.resize(1 + rng.below(512));
            for (auto& b : out) b = static_cast<std::uint8_t>(rng.next());
            break;
        }
        case 1: {  // a plausible header with a random type and length, then noise
            out = {'P', 'V', 1, static_cast<std::uint8_t>(rng.below(14)), 0, 0, 0, 0};
            const std::uint32_t len = static_cast<std::uint32_t>(rng.next());
            for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<std::uint8_t>(len >> (24 - 8 * i));
            const auto extra = rng.below(64);
            for (std::uint64_t i = 0; i < extra; ++i) out.push_back(static_cast<std::uint8_t>(rng.next()));
            break;
        }
        case 2: {  // START with a payload that is not JSON
            std::string junk(2 + rng.below(200), 'x');
            for (auto& c : junk) c = static_cast<char>(rng.next());
            out = protocol::encode_frame(protocol::FrameType::Start, junk);
            break;
        }
        default: {  // a wrong version
            out = protocol::encode_frame(protocol::FrameType::Stop, "");
            out[2] = static_cast<std::uint8_t>(2 + rng.below(250));
            break;
        }
    }
    return out;
}

[[noreturn]] void flood_main(const FloodOptions& o, int index, int control, int report) {
    ::signal(SIGPIPE, SIG_IGN);
    Rng rng(o.seed * 1000003 + static_cast<std::uint64_t>(index));
    ChildStats st;
    UniqueFd dir(::open(o.work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    struct stat dst{};
    if (!dir || ::fstat(dir.get(), &dst) != 0) ::_exit(3);

    // The START a slowloris drips, and the one FailAuth sends (a wrong inode).
    protocol::StartRequest req;
    req.argv = {"true"};
    req.env = {"PATH=/usr/bin:/bin"};
    req.cwd_dev = dst.st_dev;
    req.cwd_ino = dst.st_ino;
    req.term = "dumb";
    req.size = {24, 80};
    const auto slow_start = protocol::encode_frame(protocol::FrameType::Start, protocol::encode(req));
    req.cwd_ino += 1;
    const auto bad_start = protocol::encode_frame(protocol::FrameType::Start, protocol::encode(req));

    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, o.socket.c_str(), std::min(o.socket.size() + 1, sizeof addr.sun_path - 1));

    std::vector<Slot> slots(o.connections);
    bool engaged_sent = false;
    long rounds = 0;
    for (;;) {
        bool backlog_full = false;
        // Open connections into free slots (ConnectClose: open and close as many).
        for (auto& s : slots) {
            if (s.fd) continue;
            UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
            if (!fd) break;
            if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
                if (errno == EAGAIN) {
                    ++st.backlog_full;
                    backlog_full = true;
                    break;
                }
                if (errno == ENOENT || errno == ECONNREFUSED) ::_exit(4);  // the daemon is gone
                break;
            }
            ++st.attempts;
            switch (o.kind) {
                case FloodKind::ConnectClose: continue;  // fd closes here
                case FloodKind::Hold: break;
                case FloodKind::Slowloris:
                    if (send_bytes(fd.get(), slow_start.data(), 1, dir.get()) == 0) s.sent = 1;
                    s.next_send = Clock::now() + o.slowloris_interval;
                    break;
                case FloodKind::Garbage: {
                    const auto g = garbage(rng);
                    send_bytes(fd.get(), g.data(), g.size(), rng.chance(20) ? dir.get() : -1);
                    break;
                }
                case FloodKind::FailAuth:
                    send_bytes(fd.get(), bad_start.data(), bad_start.size(), dir.get());
                    break;
            }
            s.fd = std::move(fd);
        }
        ++rounds;
        if (!engaged_sent && (rounds >= 2 || o.kind == FloodKind::ConnectClose)) {
            [[maybe_unused]] const auto n = ::write(report, "E", 1);
            engaged_sent = true;
        }

        // Wait for the daemon's answers, the next slowloris byte, or the order to stop.
        std::vector<pollfd> p;
        p.push_back({control, POLLIN, 0});
        std::vector<Slot*> polled;
        auto wake = Clock::now() + Millis(1000);
        for (auto& s : slots) {
            if (!s.fd) continue;
            p.push_back({s.fd.get(), POLLIN, 0});
            polled.push_back(&s);
            if (o.kind == FloodKind::Slowloris) wake = std::min(wake, s.next_send);
        }
        int timeout = static_cast<int>(
            std::max<long>(0, std::chrono::duration_cast<Millis>(wake - Clock::now()).count()));
        const bool free_slot = std::any_of(slots.begin(), slots.end(), [](const Slot& s) { return !s.fd; });
        if (free_slot) timeout = backlog_full ? 2 : 0;  // keep pressing, as an attacker would
        const int n = ::poll(p.data(), p.size(), timeout);
        if (n < 0 && errno != EINTR) break;
        if (p[0].revents != 0) break;  // parent closed the control pipe (or died)
        for (std::size_t i = 1; i < p.size(); ++i) {
            if (p[i].revents == 0) continue;
            Slot& s = *polled[i - 1];
            char buf[4096];
            for (;;) {
                const ssize_t got = ::recv(s.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
                if (got > 0) {
                    if (s.in.size() < 8192) s.in.append(buf, static_cast<std::size_t>(got));
                    continue;
                }
                if (got < 0 && errno == EAGAIN) break;
                finish(s, st);  // EOF or reset
                break;
            }
        }
        if (o.kind == FloodKind::Slowloris) {
            const auto now = Clock::now();
            for (auto& s : slots) {
                if (!s.fd || s.next_send > now) continue;
                // Never complete the START: a slowloris only ever holds the handshake.
                if (s.sent + 1 < slow_start.size() &&
                    send_bytes(s.fd.get(), slow_start.data() + s.sent, 1, -1) == 0)
                    ++s.sent;
                s.next_send = now + o.slowloris_interval;
            }
        }
    }
    std::ostringstream line;
    line << "attempts " << st.attempts << " backlog_full " << st.backlog_full << " silent "
         << st.closed_silently;
    for (const auto& [code, count] : st.errors) line << " " << code << " " << count;
    line << "\n";
    const std::string text = line.str();
    [[maybe_unused]] const auto n = ::write(report, text.data(), text.size());
    ::_exit(0);
}

}  // namespace

std::unique_ptr<Flood> Flood::start(const FloodOptions& o, const Account& account, std::string& error) {
    std::unique_ptr<Flood> f(new Flood());
    for (unsigned i = 0; i < o.processes; ++i) {
        int control[2], report[2];
        if (::pipe2(control, O_CLOEXEC) != 0) {
            error = std::string("pipe: ") + std::strerror(errno);
            return nullptr;
        }
        UniqueFd control_r(control[0]), control_w(control[1]);
        if (::pipe2(report, O_CLOEXEC) != 0) {
            error = std::string("pipe: ") + std::strerror(errno);
            return nullptr;
        }
        UniqueFd report_r(report[0]), report_w(report[1]);
        const pid_t pid = ::fork();
        if (pid < 0) {
            error = std::string("fork: ") + std::strerror(errno);
            return nullptr;
        }
        if (pid == 0) {
            // Keep only stdio and our two pipe ends; nothing of the test's.
            const int c = ::dup2(control_r.get(), 3);
            const int r = ::dup2(report_w.get(), 4);
            ::close_range(5, ~0U, 0);
            const gid_t groups[] = {account.gid};
            // Started by a process already running as the account (the agent), there is
            // nothing to drop, and setgroups would fail.
            const bool as_account = ::geteuid() == account.uid && ::getuid() == account.uid;
            if (c != 3 || r != 4 || (!as_account && !drop_privileges(account.uid, account.gid, groups)))
                ::_exit(125);
            flood_main(o, static_cast<int>(i), 3, 4);
        }
        Child ch;
        ch.pid = pid;
        ch.pidfd = open_pidfd(pid);
        ch.control = std::move(control_w);
        ch.report = std::move(report_r);
        f->children_.push_back(std::move(ch));
    }
    return f;
}

std::vector<pid_t> Flood::pids() const {
    std::vector<pid_t> out;
    for (const auto& c : children_) out.push_back(c.pid);
    return out;
}

bool Flood::wait_engaged(Millis timeout) {
    const auto deadline = Clock::now() + timeout;
    for (auto& c : children_) {
        while (!c.engaged) {
            const short r = wait_fd(c.report.get(), POLLIN, deadline);
            if (!(r & (POLLIN | POLLHUP))) return false;
            char buf[256];
            const ssize_t n = ::read(c.report.get(), buf, sizeof buf);
            if (n <= 0) return false;  // the flooder died
            c.text.append(buf, static_cast<std::size_t>(n));
            if (c.text.find('E') != std::string::npos) c.engaged = true;
        }
    }
    return true;
}

FloodStats Flood::stop(Millis timeout) {
    for (auto& c : children_) c.control.reset();
    const auto deadline = Clock::now() + timeout;
    FloodStats total;
    for (auto& c : children_) {
        for (;;) {
            const short r = wait_fd(c.report.get(), POLLIN, deadline);
            if (!(r & (POLLIN | POLLHUP))) break;
            char buf[4096];
            const ssize_t n = ::read(c.report.get(), buf, sizeof buf);
            if (n <= 0) break;
            c.text.append(buf, static_cast<std::size_t>(n));
        }
        if (!wait_pidfd_exit(c.pidfd.get(), Millis(0))) ptyvisor::pidfd_send_signal(c.pidfd.get(), SIGKILL);
        siginfo_t info{};
        ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(c.pidfd.get()), &info, WEXITED);
        c.pid = -1;
        const auto at = c.text.find("attempts ");
        if (at == std::string::npos) continue;
        std::istringstream in(c.text.substr(at));
        std::string key;
        long value = 0;
        while (in >> key >> value) {
            if (key == "attempts") total.attempts += value;
            else if (key == "backlog_full") total.backlog_full += value;
            else if (key == "silent") total.closed_silently += value;
            else total.errors[key] += value;
        }
    }
    children_.clear();
    return total;
}

Flood::~Flood() {
    for (auto& c : children_) {
        if (c.pid <= 0 || !c.pidfd) continue;
        ptyvisor::pidfd_send_signal(c.pidfd.get(), SIGKILL);
        siginfo_t info{};
        ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(c.pidfd.get()), &info, WEXITED);
    }
}

// --- processes and cgroups ----------------------------------------------------------------

std::string cgroup2_mount() {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        const auto dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream rest(line.substr(dash + 3));
        std::string fstype;
        rest >> fstype;
        if (fstype != "cgroup2") continue;
        std::istringstream fields(line);
        std::string id, parent, devno, root, mount;
        fields >> id >> parent >> devno >> root >> mount;
        return mount;
    }
    return {};
}

std::string own_cgroup() {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("0::", 0) == 0) return line.substr(3);
    return {};
}

std::string direct_sessions_dir() {
    const std::string mount = cgroup2_mount();
    const std::string own = own_cgroup();
    if (mount.empty() || own.empty()) return {};
    return mount + (own == "/" ? std::string() : own) + "/ptyvisor.sessions";
}

std::vector<std::string> subdirectories(const std::string& dir) {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return out;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (e->d_type == DT_DIR && name != "." && name != "..") out.push_back(dir + "/" + name);
    }
    ::closedir(d);
    return out;
}

std::vector<pid_t> cgroup_tree_pids(const std::string& dir) {
    std::vector<pid_t> out;
    std::ifstream in(dir + "/cgroup.procs");
    pid_t p;
    while (in >> p) out.push_back(p);
    for (const auto& sub : subdirectories(dir)) {
        const auto more = cgroup_tree_pids(sub);
        out.insert(out.end(), more.begin(), more.end());
    }
    return out;
}

std::optional<ExitInfo> run_locally_as(const Account& account, const std::string& cwd,
                                       const std::vector<std::string>& argv, Millis timeout) {
    CStrings args(argv);
    CStrings env(std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"});
    UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!devnull) return std::nullopt;
    const pid_t pid = ::fork();
    if (pid < 0) return std::nullopt;
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
        ::setsid();
        for (int t = 0; t < 3; ++t) ::dup2(devnull.get(), t);
        ::close_range(3, ~0U, 0);
        const gid_t groups[] = {account.gid};
        if (!drop_privileges(account.uid, account.gid, groups)) ::_exit(125);
        if (::chdir(cwd.c_str()) != 0) ::_exit(126);
        ::execve(args.get()[0], args.get(), env.get());
        ::_exit(127);
    }
    UniqueFd pidfd = open_pidfd(pid);
    if (!wait_pidfd_exit(pidfd.get(), timeout)) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        return std::nullopt;
    }
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) != 0) return std::nullopt;
    return ExitInfo{info.si_code, info.si_status};
}

long set_nofile_soft(pid_t pid, long soft) {
    rlimit old{};
    if (::prlimit(pid, RLIMIT_NOFILE, nullptr, &old) != 0) return -1;
    rlimit now = old;
    now.rlim_cur = static_cast<rlim_t>(soft);
    if (::prlimit(pid, RLIMIT_NOFILE, &now, nullptr) != 0) return -1;
    return static_cast<long>(old.rlim_cur);
}

int send_with_control(int socket, const std::vector<std::uint8_t>& bytes,
                      const std::vector<std::uint8_t>& control) {
    iovec iov{const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!control.empty()) {
        msg.msg_control = const_cast<std::uint8_t*>(control.data());
        msg.msg_controllen = control.size();
    }
    std::size_t sent = 0;
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n < 0) return errno;
    sent = static_cast<std::size_t>(n);
    while (sent < bytes.size()) {
        const ssize_t m = ::send(socket, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (m < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        sent += static_cast<std::size_t>(m);
    }
    return 0;
}

std::vector<std::uint8_t> rights_control(const std::vector<std::vector<int>>& groups) {
    std::size_t size = 0;
    for (const auto& g : groups) size += CMSG_SPACE(sizeof(int) * g.size());
    std::vector<std::uint8_t> buf(size);
    msghdr msg{};
    msg.msg_control = buf.data();
    msg.msg_controllen = buf.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    for (const auto& g : groups) {
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * g.size());
        std::memcpy(CMSG_DATA(c), g.data(), sizeof(int) * g.size());
        c = CMSG_NXTHDR(&msg, c);
    }
    return buf;
}

}  // namespace ptyvisor::itest::rel

namespace ptyvisor::itest::rel {

std::optional<ExitInfo> run_captured(const std::vector<std::string>& argv, Millis timeout,
                                     std::string& output) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return std::nullopt;
    UniqueFd r(p[0]), w(p[1]);
    UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    CStrings args(argv);
    const pid_t pid = ::fork();
    if (pid < 0) return std::nullopt;
    if (pid == 0) {
        ::dup2(devnull.get(), 0);
        ::dup2(w.get(), 1);
        ::dup2(w.get(), 2);
        ::execvp(args.get()[0], args.get());
        ::_exit(127);
    }
    w.reset();
    UniqueFd pidfd = open_pidfd(pid);
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        const short ev = wait_fd(r.get(), POLLIN, deadline);
        if (!(ev & (POLLIN | POLLHUP))) break;
        char buf[4096];
        const ssize_t n = ::read(r.get(), buf, sizeof buf);
        if (n <= 0) break;
        output.append(buf, static_cast<std::size_t>(n));
    }
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    if (!wait_pidfd_exit(pidfd.get(), std::max(left, Millis(0)))) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        return std::nullopt;
    }
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) != 0) return std::nullopt;
    return ExitInfo{info.si_code, info.si_status};
}

}  // namespace ptyvisor::itest::rel

namespace ptyvisor::itest::rel {

AgentResult run_agent(const std::function<UniqueFd()>& connect, int cwd_fd,
                      const std::vector<std::string>& env, std::size_t count) {
    AgentResult r;
    for (std::size_t i = 0; i < count; ++i) {
        const auto t0 = Clock::now();
        UniqueFd fd = connect();
        std::string what;
        if (!fd) {
            what = "connect failed";
        } else {
            RawClient c(std::move(fd));
            const auto request = RawClient::start_request({"true"}, env, cwd_fd);
            std::string seen;
            if (const int err = c.send_start_as_client(request, cwd_fd); err != 0) {
                // The daemon may refuse before reading START (ERROR at accept): read it.
                if (auto e = c.expect_error(Millis(10000), &seen))
                    what = "ERROR " + std::string(protocol::to_string(e->code));
                else
                    what = std::string("send START: ") + std::strerror(-err);
            } else if (!c.expect_started(Millis(20000), &seen)) {
                what = seen.substr(0, seen.find(' ', 6));
                if (what.rfind("ERROR", 0) == 0) what = "ERROR " + error_code_in(seen);
                if (r.first_failure.empty()) r.first_failure = seen;
            } else {
                r.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
                const auto exit = c.read_until_exit(Millis(20000), &seen);
                if (!exit)
                    what = "no EXIT: " + seen.substr(0, 60);
                else if (exit->shell_status() != 0 || exit->reason != protocol::ExitReason::Exited)
                    what = "EXIT " + std::string(protocol::to_string(exit->reason)) + " status " +
                           std::to_string(exit->shell_status());
                else
                    c.expect_eof(Millis(10000));
            }
        }
        if (!what.empty()) {
            r.failed_at.push_back(i);
            ++r.failures[what];
            if (r.first_failure.empty()) r.first_failure = "request " + std::to_string(i) + ": " + what;
        }
    }
    return r;
}

}  // namespace ptyvisor::itest::rel

namespace ptyvisor::itest::rel {
namespace {
constexpr std::uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
inline std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
}  // namespace

Sha256::Sha256()
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}, buf_{} {}

void Sha256::block(const std::uint8_t* p) {
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i)
        w[i] = (std::uint32_t{p[4 * i]} << 24) | (std::uint32_t{p[4 * i + 1]} << 16) |
               (std::uint32_t{p[4 * i + 2]} << 8) | std::uint32_t{p[4 * i + 3]};
    for (int i = 16; i < 64; ++i) {
        const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
        const std::uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
        const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h_[0] += a; h_[1] += b; h_[2] += c; h_[3] += d; h_[4] += e; h_[5] += f; h_[6] += g; h_[7] += h;
}

void Sha256::update(const std::uint8_t* data, std::size_t n) {
    total_ += n;
    while (n > 0) {
        if (used_ == 0 && n >= 64) {
            block(data);
            data += 64;
            n -= 64;
            continue;
        }
        const std::size_t take = std::min(n, 64 - used_);
        std::memcpy(buf_ + used_, data, take);
        used_ += take;
        data += take;
        n -= take;
        if (used_ == 64) {
            block(buf_);
            used_ = 0;
        }
    }
}

std::string Sha256::hex_digest() {
    const std::uint64_t bits = total_ * 8;
    const std::uint8_t pad = 0x80;
    update(&pad, 1);
    const std::uint8_t zero = 0;
    while (used_ != 56) update(&zero, 1);
    std::uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(bits >> (56 - 8 * i));
    update(len, 8);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (const std::uint32_t v : h_)
        for (int s = 28; s >= 0; s -= 4) out += kHex[(v >> s) & 15];
    return out;
}

}  // namespace ptyvisor::itest::rel

namespace ptyvisor::itest::rel {

std::unique_ptr<PeerPool> PeerPool::start(const Account& account, std::size_t n, std::string& error) {
    auto pool = std::make_unique<PeerPool>();
    for (std::size_t i = 0; i < n; ++i) {
        auto c = Connector::start(account.uid, account.gid, {account.gid}, error);
        if (!c) return nullptr;
        pool->peers_.push_back(std::move(c));
    }
    return pool;
}

std::unique_ptr<RawClient> PeerPool::connect(std::size_t i, const std::string& socket) {
    std::string error;
    return connect_raw(*peers_[i % peers_.size()], socket, error);
}

}  // namespace ptyvisor::itest::rel
