// Hostile and unlucky peers: malformed frames, the wrong number or kind of descriptors,
// silence, the wrong credentials, a full daemon. Every rejection is an ERROR with a stable
// code followed by the end of the connection, and no descriptor stays behind in the daemon.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <map>
#include <set>

#include "common/linux.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

enum class Hostile {
    StartWithoutFd,
    StartWithTwoFds,
    StartWithThreeFds,
    StartWithMaxFds,  // SCM_MAX_FD = 253
    StartWithRegularFile,
    StartWithWrongInode,
    OversizedHeader,
    BadMagic,
    InputWithFdBeforeStart,
};

constexpr std::array kAllHostile{
    Hostile::StartWithoutFd,       Hostile::StartWithTwoFds,     Hostile::StartWithThreeFds,
    Hostile::StartWithMaxFds,      Hostile::StartWithRegularFile, Hostile::StartWithWrongInode,
    Hostile::OversizedHeader,      Hostile::BadMagic,            Hostile::InputWithFdBeforeStart,
};

std::string name_of(Hostile h) {
    switch (h) {
        case Hostile::StartWithoutFd: return "StartWithoutFd";
        case Hostile::StartWithTwoFds: return "StartWithTwoFds";
        case Hostile::StartWithThreeFds: return "StartWithThreeFds";
        case Hostile::StartWithMaxFds: return "StartWith253Fds";
        case Hostile::StartWithRegularFile: return "StartWithRegularFile";
        case Hostile::StartWithWrongInode: return "StartWithWrongInode";
        case Hostile::OversizedHeader: return "OversizedHeader";
        case Hostile::BadMagic: return "BadMagic";
        case Hostile::InputWithFdBeforeStart: return "InputWithFdBeforeStart";
    }
    return "?";
}

void PrintTo(Hostile h, std::ostream* os) { *os << name_of(h); }

// The codes a correct daemon may answer with. One each, except an INPUT carrying a
// descriptor before START, which breaks two rules at once (wrong frame for the state, and a
// descriptor on a frame other than START): error_code.h allows either code to be reported.
std::set<std::string> expected_codes(Hostile h) {
    switch (h) {
        case Hostile::StartWithoutFd:
        case Hostile::StartWithTwoFds:
        case Hostile::StartWithThreeFds:
        case Hostile::StartWithMaxFds: return {"wrong_fd_count"};
        case Hostile::StartWithRegularFile: return {"not_a_directory"};
        case Hostile::StartWithWrongInode: return {"cwd_mismatch"};
        case Hostile::OversizedHeader: return {"too_big"};
        case Hostile::BadMagic: return {"bad_frame"};
        case Hostile::InputWithFdBeforeStart: return {"wrong_fd_count", "unexpected_frame"};
    }
    return {};
}

std::string join(const std::set<std::string>& s) {
    std::string out;
    for (const auto& x : s) out += (out.empty() ? "" : " or ") + x;
    return out;
}

// Descriptors the hostile sends use; owned for the test's lifetime.
struct Ammo {
    UniqueFd dir;
    UniqueFd file;
};

Ammo make_ammo(const std::string& work) {
    Ammo a;
    a.dir.reset(::open(work.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    const std::string path = work + "/regular-file";
    write_text_file(path, "not a directory\n");
    a.file.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    return a;
}

// Sends one hostile message. Send errors are not failures: the daemon may close first.
void send_hostile(Hostile h, RawClient& c, const Ammo& ammo, const std::vector<std::string>& env) {
    auto request = RawClient::start_request({"true"}, env, ammo.dir.get());
    switch (h) {
        case Hostile::StartWithoutFd: c.send_start(request, {}); return;
        case Hostile::StartWithTwoFds: c.send_start(request, {ammo.dir.get(), ammo.dir.get()}); return;
        case Hostile::StartWithThreeFds:
            c.send_start(request, {ammo.dir.get(), ammo.dir.get(), ammo.dir.get()});
            return;
        case Hostile::StartWithMaxFds:
            c.send_start(request, std::vector<int>(SCM_MAX_FD, ammo.dir.get()));
            return;
        case Hostile::StartWithRegularFile:
            c.send_start(RawClient::start_request({"true"}, env, ammo.file.get()), {ammo.file.get()});
            return;
        case Hostile::StartWithWrongInode:
            request.cwd_ino += 1;
            c.send_start(request, {ammo.dir.get()});
            return;
        case Hostile::OversizedHeader: {
            std::vector<std::uint8_t> header(protocol::kHeaderSize);
            protocol::write_header(FrameType::Start, protocol::kMaxPayloadSize + 1,
                                   std::span<std::uint8_t, protocol::kHeaderSize>(header.data(),
                                                                                  header.size()));
            c.send(header);
            return;
        }
        case Hostile::BadMagic: {
            auto frame = protocol::encode_frame(FrameType::Start, protocol::encode(request));
            frame[0] = 'X';
            c.send(frame, {ammo.dir.get()});
            return;
        }
        case Hostile::InputWithFdBeforeStart:
            c.send_frame(FrameType::Input, "x", {ammo.dir.get()});
            return;
    }
}

// The hostile cases must not trip admission control: these tests are about frames and
// descriptors, and they make many connections in a row from one peer.
DaemonConfig permissive(DaemonConfig c) {
    c.admissions_per_minute = 1000000;
    return c;
}

class HostileStart : public EndToEnd, public ::testing::WithParamInterface<Hostile> {};

TEST_P(HostileStart, GetsTheRightErrorAndTheConnectionEnds) {
    DaemonProcess* d = start_daemon(permissive(config()));
    ASSERT_NE(d, nullptr);
    const Ammo ammo = make_ammo(work_);
    ASSERT_TRUE(ammo.dir && ammo.file);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    send_hostile(GetParam(), *c, ammo, session_env());
    std::string seen;
    const auto err = c->expect_error(Millis(10000), &seen);
    ASSERT_TRUE(err) << "expected ERROR " << join(expected_codes(GetParam())) << ", got: " << seen;
    EXPECT_TRUE(expected_codes(GetParam()).count(std::string(protocol::to_string(err->code))))
        << "expected " << join(expected_codes(GetParam())) << ", got "
        << protocol::to_string(err->code) << " (" << err->message << ")";
    EXPECT_FALSE(err->message.empty()) << "ERROR without a human message";
    EXPECT_TRUE(c->expect_eof(Millis(10000), &seen)) << "connection not closed after ERROR: " << seen;
    EXPECT_TRUE(d->running());
}

INSTANTIATE_TEST_SUITE_P(Cases, HostileStart, ::testing::ValuesIn(kAllHostile),
                         [](const auto& p) { return name_of(p.param); });

// Descriptor hostility: thousands of hostile attempts, and the daemon's descriptor count is
// exactly what it was before them. Afterwards the agent still gets its session.
TEST_F(EndToEnd, HostileAttemptsLeakNoDescriptor) {
    DaemonProcess* d = start_daemon(permissive(config()));
    ASSERT_NE(d, nullptr);
    const Ammo ammo = make_ammo(work_);
    ASSERT_TRUE(ammo.dir && ammo.file);
    const auto env = session_env();

    auto attempt = [&](Hostile h, std::map<std::string, int>& wrong) {
        auto c = connect_as_account();
        if (!c) return false;
        send_hostile(h, *c, ammo, env);
        std::string seen;
        const auto err = c->expect_error(Millis(10000), &seen);
        const std::string got = err ? std::string(protocol::to_string(err->code)) : "no ERROR: " + seen;
        if (!err || !expected_codes(h).count(got)) ++wrong[name_of(h) + " -> " + got];
        if (!c->expect_eof(Millis(10000), &seen)) ++wrong[name_of(h) + " -> not closed: " + seen];
        return true;
    };

    // One round first, so that descriptors a daemon opens once, lazily, count in the baseline.
    // The baseline is the count once the last of those connections is released (see
    // fd_count_converging_to); if it never returns to the idle count, that is the baseline.
    const long idle = d->idle_fd_count();
    ASSERT_GT(idle, 0);
    std::map<std::string, int> wrong;
    for (const Hostile h : kAllHostile) ASSERT_TRUE(attempt(h, wrong));
    const long baseline = d->fd_count_converging_to(idle, Millis(2000));
    const std::string baseline_fds = fd_listing(d->pid());
    RecordProperty("fds_idle", static_cast<int>(idle));
    RecordProperty("fds_baseline", static_cast<int>(baseline));

    const std::size_t total = scaled(1000, 5000);
    for (std::size_t i = 0; i < total; ++i)
        ASSERT_TRUE(attempt(kAllHostile[i % kAllHostile.size()], wrong)) << "attempt " << i;

    EXPECT_EQ(d->fd_count_converging_to(baseline, Millis(2000)), baseline)
        << "after " << total << " hostile attempts\nbefore:\n"
                                        << baseline_fds << "after:\n" << fd_listing(d->pid());
    for (const auto& [what, n] : wrong) ADD_FAILURE() << n << " x " << what;
    RecordProperty("attempts", static_cast<int>(total));

    auto c = run_cli({"run", "--", "true"});
    ASSERT_NE(c, nullptr);
    const auto e = c->wait_exit(Millis(30000));
    ASSERT_TRUE(e) << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
}

// A descriptor attached to INPUT during a live session: ERROR wrong_fd_count, the session
// ends without leftovers, and the descriptor is not kept.
TEST_F(EndToEnd, InputWithFdDuringASessionIsRefused) {
    DaemonProcess* d = start_daemon(permissive(config()));
    ASSERT_NE(d, nullptr);
    const Ammo ammo = make_ammo(work_);
    ASSERT_TRUE(ammo.dir);

    auto one = [&](bool& ok) {
        ok = false;
        auto c = connect_as_account();
        ASSERT_NE(c, nullptr);
        ASSERT_TRUE(start_session(*c, {"sh", "-c", "echo pid=$$; exec sleep 1000"}));
        const auto pid = read_number(*c, "pid=");
        ASSERT_TRUE(pid);
        UniqueFd pidfd = open_pidfd(*pid);
        ASSERT_TRUE(pidfd);
        ASSERT_EQ(c->send_frame(FrameType::Input, "x", {ammo.dir.get()}), 0);
        std::string seen;
        const auto err = c->expect_error(Millis(10000), &seen);
        ASSERT_TRUE(err) << "expected ERROR wrong_fd_count, got: " << seen;
        EXPECT_EQ(protocol::to_string(err->code), "wrong_fd_count") << err->message;
        EXPECT_TRUE(c->expect_eof(Millis(10000), &seen)) << seen;
        EXPECT_TRUE(wait_pidfd_exit(pidfd.get(), Millis(20000))) << "session process " << *pid
                                                                  << " left running";
        ok = true;
    };
    const long idle = d->idle_fd_count();
    ASSERT_GT(idle, 0);
    bool ok = false;
    one(ok);
    ASSERT_TRUE(ok);
    const long baseline = d->fd_count_converging_to(idle, Millis(2000));
    const std::string baseline_fds = fd_listing(d->pid());
    const std::size_t rounds = scaled(20, 100);
    for (std::size_t i = 0; i < rounds && ok; ++i) one(ok);
    ASSERT_TRUE(ok);
    EXPECT_EQ(d->fd_count_converging_to(baseline, Millis(2000)), baseline)
        << "after " << rounds << " sessions refused mid-stream\nbefore:\n"
                                        << baseline_fds << "after:\n" << fd_listing(d->pid());
}

TEST_F(EndToEnd, SilentClientGetsHandshakeTimeout) {
    DaemonConfig cfg = config();
    cfg.handshake = 0.5;
    ASSERT_NE(start_daemon(cfg), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    const auto t0 = Clock::now();
    std::string seen;
    const auto err = c->expect_error(Millis(10000), &seen);
    const auto elapsed = std::chrono::duration_cast<Millis>(Clock::now() - t0);
    ASSERT_TRUE(err) << "expected ERROR handshake_timeout, got: " << seen;
    EXPECT_EQ(protocol::to_string(err->code), "handshake_timeout") << err->message;
    EXPECT_GE(elapsed.count(), 400) << "timed out before the configured 0.5 s";
    EXPECT_LT(elapsed.count(), 3000) << "the 0.5 s handshake deadline was not kept";
    EXPECT_TRUE(c->expect_eof(Millis(5000), &seen)) << seen;
}

// START from a peer whose uid or gid is not the account's. Each helper can reach the socket
// (0660, group of the account) through a supplementary group, so the rejection tested is the
// daemon's, not the file system's.
// A connect-and-close flood: a connection whose peer has hung up before it is accepted is
// dropped from one recv(), before its pidfd, its cgroup or a handshake slot (docs/admission.md,
// "Cost of a refused peer"). The daemon is stopped while they queue, so every one of them is
// closed when accepted; STATUS, queued behind them, counts only itself as accepted, and the
// fifty as hung up.
TEST_F(EndToEnd, ConnectionsThatHungUpBeforeAcceptAreDroppedBeforeAdmission) {
    DaemonProcess* d = start_daemon();
    ASSERT_NE(d, nullptr);
    ASSERT_EQ(::kill(d->pid(), SIGSTOP), 0);
    for (int i = 0; i < 50; ++i) {
        auto gone = connect_as_account();
        ASSERT_NE(gone, nullptr);
    }  // each closes here, unaccepted
    auto root = connect_as(0, 0, {});
    ASSERT_EQ(::kill(d->pid(), SIGCONT), 0);
    ASSERT_NE(root, nullptr);
    const auto status = status_of(*root);
    ASSERT_TRUE(status);
    EXPECT_EQ(status->reply.counters.accepted, 1u) << status->text;
    EXPECT_EQ(status->reply.counters.hung_up, 50u) << status->text;
    EXPECT_TRUE(status->reply.counters.rejected.empty()) << status->text;
    // And the agent is served as before.
    auto client = connect_as_account();
    ASSERT_NE(client, nullptr);
    UniqueFd cwd = open_work_dir();
    ASSERT_EQ(client->send_start(RawClient::start_request({"true"}, session_env(), cwd.get()), {cwd.get()}), 0);
    std::string seen;
    EXPECT_TRUE(client->expect_started(Millis(10000), &seen).has_value()) << seen;
}

TEST_F(EndToEnd, StartFromAnotherUidIsNotAllowed) {
    ASSERT_NE(start_daemon(), nullptr);
    const auto nobody = lookup_account("nobody");
    if (!nobody) GTEST_SKIP() << "no 'nobody' account on this machine";
    auto c = connect_as(nobody->uid, nobody->gid, {account_->gid});
    ASSERT_NE(c, nullptr);
    UniqueFd cwd = open_work_dir();
    c->send_start(RawClient::start_request({"true"}, session_env(), cwd.get()), {cwd.get()});
    std::string seen;
    const auto err = c->expect_error(Millis(10000), &seen);
    ASSERT_TRUE(err) << "expected ERROR not_allowed, got: " << seen;
    EXPECT_EQ(protocol::to_string(err->code), "not_allowed") << err->message;
    EXPECT_TRUE(c->expect_eof(Millis(10000), &seen)) << seen;
}

TEST_F(EndToEnd, StartFromRootIsNotAllowed) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as(0, 0, {});
    ASSERT_NE(c, nullptr);
    UniqueFd cwd = open_work_dir();
    c->send_start(RawClient::start_request({"true"}, session_env(), cwd.get()), {cwd.get()});
    std::string seen;
    const auto err = c->expect_error(Millis(10000), &seen);
    ASSERT_TRUE(err) << "expected ERROR not_allowed, got: " << seen;
    EXPECT_EQ(protocol::to_string(err->code), "not_allowed") << err->message;
    EXPECT_TRUE(c->expect_eof(Millis(10000), &seen)) << seen;
}

TEST_F(EndToEnd, StartWithTheAccountUidButAnotherGidIsNotAllowed) {
    ASSERT_NE(start_daemon(), nullptr);
    const auto nobody = lookup_account("nobody");
    if (!nobody) GTEST_SKIP() << "no 'nobody' account on this machine";
    ASSERT_NE(nobody->gid, account_->gid);
    auto c = connect_as(account_->uid, nobody->gid, {account_->gid});
    ASSERT_NE(c, nullptr);
    UniqueFd cwd = open_work_dir();
    c->send_start(RawClient::start_request({"true"}, session_env(), cwd.get()), {cwd.get()});
    std::string seen;
    const auto err = c->expect_error(Millis(10000), &seen);
    ASSERT_TRUE(err) << "expected ERROR not_allowed, got: " << seen;
    EXPECT_EQ(protocol::to_string(err->code), "not_allowed") << err->message;
    EXPECT_TRUE(c->expect_eof(Millis(10000), &seen)) << seen;
}

TEST_F(EndToEnd, SecondSessionIsBusyWhenMaxSessionsIsReached) {
    DaemonConfig cfg = config();
    cfg.max_sessions = 1;
    ASSERT_NE(start_daemon(cfg), nullptr);
    auto first = connect_as_account();
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(start_session(*first, {"sh", "-c", "echo pid=$$; exec sleep 1000"}));
    ASSERT_TRUE(read_number(*first, "pid="));

    auto second = run_cli({"run", "--", "true"});
    ASSERT_NE(second, nullptr);
    const auto e = second->wait_exit(Millis(30000));
    ASSERT_TRUE(e) << second->transcript();
    EXPECT_TRUE(e->exited_with(255)) << e->describe() << "\n" << second->transcript();
    EXPECT_NE(second->err().find("busy"), std::string::npos) << second->transcript();

    // The slot comes back when the first session ends.
    ASSERT_EQ(first->send_frame(FrameType::Stop, ""), 0);
    std::string seen;
    ASSERT_TRUE(first->read_until_exit(Millis(20000), &seen)) << seen;
    ASSERT_TRUE(first->expect_eof(Millis(20000), &seen)) << seen;
    auto third = run_cli({"run", "--", "true"});
    ASSERT_NE(third, nullptr);
    const auto e3 = third->wait_exit(Millis(30000));
    ASSERT_TRUE(e3) << third->transcript();
    EXPECT_TRUE(e3->exited_with(0)) << e3->describe() << "\n" << third->transcript();
}

}  // namespace
}  // namespace ptyvisor::itest
