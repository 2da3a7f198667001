// Scenario 2, fd hostility: no descriptor a client sends may leak into the daemon.
//
// START with 0, 2, 3 and 253 descriptors; descriptors of every kind (socket, pipe, regular
// file, /dev/null, eventfd, memfd, pidfd, a terminal, an O_PATH regular file, a directory
// with the wrong inode, an O_PATH directory with the wrong inode); descriptors split over two
// messages or in two control messages; descriptors attached to INPUT before and after START;
// and control data the kernel truncates (the daemon's RLIMIT_NOFILE lowered so that only part
// of 253 descriptors can be installed: MSG_CTRUNC). Every attempt gets its stable ERROR code
// and the connection ends; across thousands of attempts the daemon's open-descriptor count is
// exactly what it was after a warm-up, and its RSS is within 2 MiB of it.
//
// An O_PATH *directory* whose st_dev/st_ino match is accepted by design: fchdir() works on
// it, and opening it proved the client could reach the directory. That is tested too.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <iostream>
#include <map>
#include <set>

#include "common/linux.h"
#include "rel_support.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

enum class Attack {
    NoFd,
    TwoFds,
    ThreeFds,
    MaxFds,
    Socket,
    Pipe,
    RegularFile,
    DevNull,
    EventFd,
    MemFd,
    PidFd,
    Terminal,
    OPathFile,
    DirWrongInode,
    OPathDirWrongInode,
    SplitOverTwoMessages,
    TwoControlMessages,
    InputWithFdBeforeStart,
    InputWithFdAfterStart,  // starts a session
    OPathDirMatching,       // accepted: a session runs
};

constexpr std::array kAttacks{
    Attack::NoFd,         Attack::TwoFds,          Attack::ThreeFds,
    Attack::MaxFds,       Attack::Socket,          Attack::Pipe,
    Attack::RegularFile,  Attack::DevNull,         Attack::EventFd,
    Attack::MemFd,        Attack::PidFd,           Attack::Terminal,
    Attack::OPathFile,    Attack::DirWrongInode,   Attack::OPathDirWrongInode,
    Attack::SplitOverTwoMessages, Attack::TwoControlMessages, Attack::InputWithFdBeforeStart,
    Attack::InputWithFdAfterStart, Attack::OPathDirMatching,
};

std::string name_of(Attack a) {
    switch (a) {
        case Attack::NoFd: return "NoFd";
        case Attack::TwoFds: return "TwoFds";
        case Attack::ThreeFds: return "ThreeFds";
        case Attack::MaxFds: return "253Fds";
        case Attack::Socket: return "Socket";
        case Attack::Pipe: return "Pipe";
        case Attack::RegularFile: return "RegularFile";
        case Attack::DevNull: return "DevNull";
        case Attack::EventFd: return "EventFd";
        case Attack::MemFd: return "MemFd";
        case Attack::PidFd: return "PidFd";
        case Attack::Terminal: return "Terminal";
        case Attack::OPathFile: return "OPathFile";
        case Attack::DirWrongInode: return "DirWrongInode";
        case Attack::OPathDirWrongInode: return "OPathDirWrongInode";
        case Attack::SplitOverTwoMessages: return "SplitOverTwoMessages";
        case Attack::TwoControlMessages: return "TwoControlMessages";
        case Attack::InputWithFdBeforeStart: return "InputWithFdBeforeStart";
        case Attack::InputWithFdAfterStart: return "InputWithFdAfterStart";
        case Attack::OPathDirMatching: return "OPathDirMatching";
    }
    return "?";
}

// The ERROR codes a correct daemon may answer with; {"STARTED"} for the accepted case.
std::set<std::string> expected(Attack a) {
    switch (a) {
        case Attack::NoFd:
        case Attack::TwoFds:
        case Attack::ThreeFds:
        case Attack::MaxFds:
        case Attack::SplitOverTwoMessages:
        case Attack::TwoControlMessages:
        case Attack::InputWithFdAfterStart: return {"wrong_fd_count"};
        case Attack::InputWithFdBeforeStart: return {"wrong_fd_count", "unexpected_frame"};
        case Attack::Socket:
        case Attack::Pipe:
        case Attack::RegularFile:
        case Attack::DevNull:
        case Attack::EventFd:
        case Attack::MemFd:
        case Attack::PidFd:
        case Attack::Terminal:
        case Attack::OPathFile: return {"not_a_directory"};
        case Attack::DirWrongInode:
        case Attack::OPathDirWrongInode: return {"cwd_mismatch"};
        case Attack::OPathDirMatching: return {"STARTED"};
    }
    return {};
}

struct Ammo {
    UniqueFd dir, dir_path, file, file_path, devnull, sock_a, sock_b, pipe_r, pipe_w, event, memfd,
        pidfd, ptmx;
};

Ammo make_ammo(const std::string& work) {
    Ammo a;
    a.dir.reset(::open(work.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    a.dir_path.reset(::open(work.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    const std::string path = work + "/regular-file";
    write_text_file(path, "not a directory\n");
    a.file.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    a.file_path.reset(::open(path.c_str(), O_PATH | O_CLOEXEC));
    a.devnull.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
        a.sock_a.reset(sv[0]);
        a.sock_b.reset(sv[1]);
    }
    int p[2];
    if (::pipe2(p, O_CLOEXEC) == 0) {
        a.pipe_r.reset(p[0]);
        a.pipe_w.reset(p[1]);
    }
    a.event.reset(::eventfd(0, EFD_CLOEXEC));
    a.memfd.reset(::memfd_create("rel", MFD_CLOEXEC));
    a.pidfd.reset(ptyvisor::pidfd_open(::getpid()));
    a.ptmx.reset(::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC));
    return a;
}

bool complete(const Ammo& a) {
    return a.dir && a.dir_path && a.file && a.file_path && a.devnull && a.sock_a && a.pipe_r &&
           a.event && a.memfd && a.pidfd && a.ptmx;
}

// Sets the soft RLIMIT_NOFILE of pid, remembering the original the first time.
long set_limit(pid_t pid, long soft, long& original) {
    const long old = rel::set_nofile_soft(pid, soft);
    if (original < 0) original = old;
    return old;
}

class FdHostility : public EndToEnd {
protected:
    DaemonConfig permissive() {
        DaemonConfig c = config();
        c.admissions_per_minute = 1000000;  // the subject is descriptors, not the rate
        return c;
    }

    // One attempt; returns "" when the daemon answered as required, else what went wrong.
    std::string attempt(Attack a, const Ammo& ammo) {
        auto c = connect_as_account();
        if (!c) return "connect failed";
        const auto env = session_env();
        auto start_for = [&](int fd) { return RawClient::start_request({"true"}, env, fd); };
        auto start_bytes = [&](const protocol::StartRequest& r) {
            return protocol::encode_frame(FrameType::Start, protocol::encode(r));
        };
        const auto req = start_for(ammo.dir.get());
        switch (a) {
            case Attack::NoFd: c->send_start(req, {}); break;
            case Attack::TwoFds: c->send_start(req, {ammo.dir.get(), ammo.dir.get()}); break;
            case Attack::ThreeFds: c->send_start(req, {ammo.dir.get(), ammo.file.get(), ammo.pipe_r.get()}); break;
            case Attack::MaxFds: c->send_start(req, std::vector<int>(SCM_MAX_FD, ammo.dir.get())); break;
            case Attack::Socket: c->send_start(start_for(ammo.sock_a.get()), {ammo.sock_a.get()}); break;
            case Attack::Pipe: c->send_start(start_for(ammo.pipe_r.get()), {ammo.pipe_r.get()}); break;
            case Attack::RegularFile: c->send_start(start_for(ammo.file.get()), {ammo.file.get()}); break;
            case Attack::DevNull: c->send_start(start_for(ammo.devnull.get()), {ammo.devnull.get()}); break;
            case Attack::EventFd: c->send_start(start_for(ammo.event.get()), {ammo.event.get()}); break;
            case Attack::MemFd: c->send_start(start_for(ammo.memfd.get()), {ammo.memfd.get()}); break;
            case Attack::PidFd: c->send_start(start_for(ammo.pidfd.get()), {ammo.pidfd.get()}); break;
            case Attack::Terminal: c->send_start(start_for(ammo.ptmx.get()), {ammo.ptmx.get()}); break;
            case Attack::OPathFile: c->send_start(start_for(ammo.file_path.get()), {ammo.file_path.get()}); break;
            case Attack::DirWrongInode: {
                auto r = req;
                r.cwd_ino ^= 0x5a5a;
                c->send_start(r, {ammo.dir.get()});
                break;
            }
            case Attack::OPathDirWrongInode: {
                auto r = req;
                r.cwd_dev += 1;
                c->send_start(r, {ammo.dir_path.get()});
                break;
            }
            case Attack::SplitOverTwoMessages: {
                const auto bytes = start_bytes(req);
                const std::vector<std::uint8_t> head(bytes.begin(), bytes.begin() + 1);
                const std::vector<std::uint8_t> tail(bytes.begin() + 1, bytes.end());
                c->send(head, {ammo.dir.get()});
                c->send(tail, {ammo.dir.get()});
                break;
            }
            case Attack::TwoControlMessages:
                rel::send_with_control(c->fd(), start_bytes(req),
                                       rel::rights_control({{ammo.dir.get()}, {ammo.dir.get()}}));
                break;
            case Attack::InputWithFdBeforeStart: c->send_frame(FrameType::Input, "x", {ammo.dir.get()}); break;
            case Attack::InputWithFdAfterStart:
                c->send_start(RawClient::start_request({"sleep", "1000"}, env, ammo.dir.get()), {ammo.dir.get()});
                c->send_frame(FrameType::Input, "x", {ammo.file.get()});
                break;
            case Attack::OPathDirMatching:
                c->send_start(start_for(ammo.dir_path.get()), {ammo.dir_path.get()});
                break;
        }
        std::string seen;
        if (a == Attack::OPathDirMatching) {
            if (!c->expect_started(Millis(20000), &seen)) return "no STARTED: " + seen.substr(0, 100);
            const auto exit = c->read_until_exit(Millis(20000), &seen);
            if (!exit || exit->shell_status() != 0) return "no EXIT 0: " + seen.substr(0, 100);
        } else {
            const auto err = c->expect_error(Millis(20000), &seen);
            if (!err) return "no ERROR: " + seen.substr(0, 100);
            const std::string code(protocol::to_string(err->code));
            if (!expected(a).count(code)) return "ERROR " + code;
        }
        if (!c->expect_eof(Millis(20000), &seen)) return "not closed: " + seen.substr(0, 100);
        return {};
    }
};

TEST_F(FdHostility, ThousandsOfHostileSendsLeakNoDescriptorAndNoMemory) {
    DaemonProcess* d = start_daemon(permissive());
    ASSERT_NE(d, nullptr);
    const Ammo ammo = make_ammo(work_);
    ASSERT_TRUE(complete(ammo));

    std::map<std::string, long> wrong;
    auto run = [&](std::size_t n, std::size_t offset) {
        for (std::size_t i = 0; i < n; ++i) {
            const Attack a = kAttacks[(i + offset) % kAttacks.size()];
            const std::string problem = attempt(a, ammo);
            if (!problem.empty()) ++wrong[name_of(a) + " -> " + problem];
        }
    };
    // Warm-up: every kind several times, so that whatever the daemon allocates once (lazily
    // opened files, malloc arenas, the first session's cgroup root) is in the baseline.
    const long idle = d->idle_fd_count();
    ASSERT_GT(idle, 0);
    run(kAttacks.size() * 10, 0);
    const long baseline = d->fd_count_converging_to(idle, Millis(5000));
    const std::string baseline_fds = fd_listing(d->pid());
    const long rss0 = d->rss_kib();

    const std::size_t total = scaled(2000, 10000);
    const auto t0 = Clock::now();
    run(total, 0);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const long fds = d->fd_count_converging_to(baseline, Millis(5000));
    const long rss1 = d->rss_kib();
    std::cout << "[fd hostility] " << total << " attempts of " << kAttacks.size() << " kinds in "
              << seconds << " s: fds idle " << idle << ", baseline " << baseline << ", after " << fds
              << "; RSS " << rss0 << " KiB -> " << rss1 << " KiB (" << (rss1 - rss0) << " KiB)\n";
    RecordProperty("attempts", static_cast<int>(total));
    RecordProperty("rss_growth_kib", static_cast<int>(rss1 - rss0));

    for (const auto& [what, n] : wrong) ADD_FAILURE() << n << " x " << what;
    EXPECT_EQ(fds, baseline) << "before:\n" << baseline_fds << "after:\n" << fd_listing(d->pid());
    // Under ASan the daemon's RSS also holds ASan's quarantine of freed blocks (16 MiB in the
    // asan test preset), which fills with any allocation churn, each worker thread's own
    // quarantine and allocator cache, and the allocator's size-class regions: what it can
    // tell is only that nothing grows without bound (LeakSanitizer judges leaks there). The
    // 2 MiB bound is for the daemon itself, and the plain build checks it.
#if defined(__SANITIZE_ADDRESS__)
    constexpr long kRssToleranceKib = 48 * 1024;
#else
    constexpr long kRssToleranceKib = 2048;
#endif
    EXPECT_LE(rss1 - rss0, kRssToleranceKib) << "daemon RSS grew by " << (rss1 - rss0) << " KiB over "
                                             << total << " hostile attempts";
    EXPECT_TRUE(d->running());
}

// MSG_CTRUNC: the daemon's descriptor limit is lowered (prlimit) so that the kernel can
// install only some of the 253 descriptors of a START and truncates the rest. The daemon must
// answer wrong_fd_count, close what it did receive, and work normally once the limit is back.
TEST_F(FdHostility, TruncatedControlDataIsRefusedAndNothingStays) {
    DaemonProcess* d = start_daemon(permissive());
    ASSERT_NE(d, nullptr);
    const Ammo ammo = make_ammo(work_);
    ASSERT_TRUE(complete(ammo));
    // Warm-up: whatever the daemon opens once, lazily, for a connection is in the baseline.
    const long idle_at_start = d->idle_fd_count();
    ASSERT_GT(idle_at_start, 0);
    ASSERT_EQ(attempt(Attack::MaxFds, ammo), "");
    const long idle = d->fd_count_converging_to(idle_at_start, Millis(5000));
    ASSERT_GT(idle, 0);
    const std::size_t rounds = scaled(100, 1000);
    std::map<std::string, long> wrong;
    std::map<std::string, long> messages;  // what the daemon said: shows the truncation was seen
    long original = -1;
    for (std::size_t i = 0; i < rounds; ++i) {
        // Room for the connection, its pidfd and a few more: never for 253.
        const long before = set_limit(d->pid(), idle + 8 + static_cast<long>(i % 8), original);
        ASSERT_GE(before, 0) << "prlimit failed";
        auto c = connect_as_account();
        ASSERT_NE(c, nullptr);
        c->send_start(RawClient::start_request({"true"}, session_env(), ammo.dir.get()),
                      std::vector<int>(SCM_MAX_FD, ammo.dir.get()));
        std::string seen;
        const auto err = c->expect_error(Millis(20000), &seen);
        if (!err)
            ++wrong["no ERROR: " + seen.substr(0, 100)];
        else
            ++messages[err->message];
        if (err && err->code != protocol::ErrorCode::WrongFdCount)
            ++wrong["ERROR " + std::string(protocol::to_string(err->code)) + " (" + err->message + ")"];
        if (!c->expect_eof(Millis(20000), &seen)) ++wrong["not closed: " + seen.substr(0, 100)];
        ASSERT_GE(rel::set_nofile_soft(d->pid(), original), 0);
    }
    const long fds = d->fd_count_converging_to(idle, Millis(5000));
    std::cout << "[fd hostility] " << rounds << " truncated START control messages: fds " << idle
              << " -> " << fds << "; ERROR messages:";
    for (const auto& [m, n] : messages) std::cout << " '" << m << "' x" << n;
    std::cout << "\n";
    for (const auto& [what, n] : wrong) ADD_FAILURE() << n << " of " << rounds << ": " << what;
    EXPECT_EQ(fds, idle) << fd_listing(d->pid());
    // And the daemon still serves.
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(start_session(*c, {"true"}));
    std::string seen;
    const auto exit = c->read_until_exit(Millis(20000), &seen);
    ASSERT_TRUE(exit) << seen;
    EXPECT_EQ(exit->shell_status(), 0);
}

// The accepted O_PATH directory: the session really runs in it.
TEST_F(FdHostility, OPathDirectoryWithMatchingIdentityIsTheWorkingDirectory) {
    ASSERT_NE(start_daemon(permissive()), nullptr);
    UniqueFd dir(::open(work_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->send_start(RawClient::start_request({"sh", "-c", "echo cwd=$(pwd)"}, session_env(), dir.get()),
                            {dir.get()}),
              0);
    std::string seen;
    ASSERT_TRUE(c->expect_started(Millis(20000), &seen)) << seen;
    const auto exit = c->read_until_exit(Millis(20000), &seen);
    ASSERT_TRUE(exit) << seen;
    EXPECT_EQ(exit->shell_status(), 0);
    EXPECT_NE(without_cr(c->output()).find("cwd=" + work_ + "\n"), std::string::npos) << c->output();
}

}  // namespace
}  // namespace ptyvisor::itest
