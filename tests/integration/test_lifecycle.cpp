// How sessions end, and that each way leaves no process behind: STOP, a vanished client,
// daemon shutdown, and a daemon killed outright (orphans cleaned by the next start).
//
// Every session here runs hup_immune_sleepers(): a background sleep and the main process
// (exec'd sleep), both ignoring SIGHUP, so neither dies merely because its terminal closes.
// Only the supervisor killing the session ends them. Their pidfds are opened as soon as the
// PIDs are printed, so a recycled PID can never pass for a survivor.
#include <poll.h>
#include <signal.h>

#include "common/linux.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::ExitReason;
using protocol::FrameType;

struct Sleepers {
    UniqueFd bg;
    UniqueFd main;
    pid_t bg_pid = 0;
    pid_t main_pid = 0;
    [[nodiscard]] bool both_alive() const {
        return ptyvisor::pidfd_alive(bg.get()) && ptyvisor::pidfd_alive(main.get());
    }
    // Both gone within `timeout` (zero: right now).
    [[nodiscard]] bool both_gone(Millis timeout) const {
        const auto deadline = Clock::now() + timeout;
        const bool a = (wait_fd(bg.get(), POLLIN, deadline) & POLLIN) != 0;
        const bool b = (wait_fd(main.get(), POLLIN, deadline) & POLLIN) != 0;
        return a && b;
    }
    [[nodiscard]] std::string describe() const {
        return "bg pid " + std::to_string(bg_pid) +
               (ptyvisor::pidfd_alive(bg.get()) ? " alive" : " gone") + ", main pid " +
               std::to_string(main_pid) +
               (ptyvisor::pidfd_alive(main.get()) ? " alive" : " gone");
    }
};

template <class Client>
std::optional<Sleepers> sleepers_of(Client& client) {
    const auto bg = read_number(client, "bg=");
    const auto main = read_number(client, "pid=");
    if (!bg || !main) return std::nullopt;
    Sleepers s;
    s.bg_pid = *bg;
    s.main_pid = *main;
    s.bg = open_pidfd(*bg);
    s.main = open_pidfd(*main);
    if (!s.bg || !s.main) {
        ADD_FAILURE() << "the session's processes are not visible from the test (pidfd_open): "
                      << s.describe();
        return std::nullopt;
    }
    return s;
}

// The cleanup deadline of the default configuration plus slack: how long the supervisor may
// take to make a session's processes disappear once it has decided to end the session.
constexpr Millis kCleanup{20000};

TEST_F(EndToEnd, StopEndsTheSessionAndLeavesNoProcess) {
    ASSERT_NE(start_daemon(), nullptr);
    auto client = connect_as_account();
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(start_session(*client, hup_immune_sleepers()));
    auto sleepers = sleepers_of(*client);
    ASSERT_TRUE(sleepers);
    ASSERT_TRUE(sleepers->both_alive()) << sleepers->describe();

    ASSERT_EQ(client->send_frame(FrameType::Stop, ""), 0);
    std::string seen;
    const auto exit = client->read_until_exit(kCleanup, &seen);
    ASSERT_TRUE(exit) << "no EXIT after STOP; got: " << seen;
    EXPECT_EQ(protocol::to_string(exit->reason), "stopped");
    EXPECT_TRUE(sleepers->both_gone(kCleanup)) << sleepers->describe();
    EXPECT_TRUE(client->expect_eof(Millis(10000), &seen)) << "after EXIT: " << seen;
}

TEST_F(EndToEnd, KilledClientLeavesNoSessionProcess) {
    ASSERT_NE(start_daemon(), nullptr);
    const auto cmd = hup_immune_sleepers();
    auto c = run_cli({"run", "--", cmd[0], cmd[1], cmd[2]}, ClientOptions::Stdin::Pipe);
    ASSERT_NE(c, nullptr);
    auto sleepers = sleepers_of(*c);
    ASSERT_TRUE(sleepers);
    ASSERT_TRUE(sleepers->both_alive()) << sleepers->describe();

    c->signal(SIGKILL);
    ASSERT_TRUE(c->wait_exit(Millis(10000)));
    EXPECT_TRUE(sleepers->both_gone(kCleanup))
        << "the daemon did not end the session of a vanished client: " << sleepers->describe();
    EXPECT_TRUE(daemon()->running()) << "the daemon died with its client";
}

// SIGTERM: every live session gets EXIT(shutdown), no session process is left when the
// daemon has exited, and the daemon exits 0.
TEST_F(EndToEnd, SigtermEndsEverySessionWithShutdownAndLeavesNoProcess) {
    DaemonProcess* d = start_daemon();
    ASSERT_NE(d, nullptr);

    auto raw = connect_as_account();
    ASSERT_NE(raw, nullptr);
    ASSERT_TRUE(start_session(*raw, hup_immune_sleepers()));
    auto raw_sleepers = sleepers_of(*raw);
    ASSERT_TRUE(raw_sleepers);

    const auto cmd = hup_immune_sleepers();
    auto cli = run_cli({"run", "--", cmd[0], cmd[1], cmd[2]}, ClientOptions::Stdin::Pipe);
    ASSERT_NE(cli, nullptr);
    auto cli_sleepers = sleepers_of(*cli);
    ASSERT_TRUE(cli_sleepers);

    ASSERT_EQ(ptyvisor::pidfd_send_signal(d->pidfd(), SIGTERM), 0);
    std::string seen;
    const auto exit = raw->read_until_exit(kCleanup, &seen);
    ASSERT_TRUE(exit) << "no EXIT on shutdown; got: " << seen;
    EXPECT_EQ(protocol::to_string(exit->reason), "shutdown");

    const auto daemon_exit = d->wait_exit(Millis(30000));
    ASSERT_TRUE(daemon_exit) << "the daemon did not exit within 30 s of SIGTERM";
    EXPECT_TRUE(daemon_exit->exited_with(0)) << daemon_exit->describe();
    // By the time the daemon has exited, its sessions must be gone.
    EXPECT_TRUE(raw_sleepers->both_gone(Millis(0))) << raw_sleepers->describe();
    EXPECT_TRUE(cli_sleepers->both_gone(Millis(0))) << cli_sleepers->describe();

    const auto cli_exit = cli->wait_exit(Millis(10000));
    ASSERT_TRUE(cli_exit) << cli->transcript();
    EXPECT_NE(cli->err().find("ptyvisor: session ended: shutdown"), std::string::npos)
        << cli->transcript();
}

// STATUS from root (protocol.md 5.7), as the real daemon sends it: it decodes, and lists
// the live session with its main process.
TEST_F(EndToEnd, StatusListsTheLiveSession) {
    const DaemonConfig cfg = config();
    ASSERT_NE(start_daemon(cfg), nullptr);
    auto client = connect_as_account();
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(start_session(*client, hup_immune_sleepers()));
    auto sleepers = sleepers_of(*client);
    ASSERT_TRUE(sleepers);

    const auto status = status_as_root();
    ASSERT_TRUE(status);
    EXPECT_EQ(status->reply.backend, cfg.backend);
    EXPECT_FALSE(status->reply.truncated);
    ASSERT_EQ(status->reply.sessions.size(), 1u) << status->text;
    const auto& s = status->reply.sessions[0];
    EXPECT_EQ(s.pid, sleepers->main_pid) << status->text;
    EXPECT_EQ(s.argv0, hup_immune_sleepers()[0]);
    EXPECT_GT(s.started_at, 0);
    EXPECT_GT(s.bytes_out, 0u);
    EXPECT_GE(status->reply.counters.accepted, 2u);
}

// SIGKILL leaves sessions running (nobody could stop them); the next daemon on the same
// state directory stops them before it listens.
TEST_F(EndToEnd, NextStartCleansUpSessionsOrphanedByAKilledDaemon) {
    const DaemonConfig cfg = config();
    DaemonProcess* first = start_daemon(cfg);
    ASSERT_NE(first, nullptr);
    auto client = connect_as_account();
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(start_session(*client, hup_immune_sleepers()));
    auto sleepers = sleepers_of(*client);
    ASSERT_TRUE(sleepers);

    const auto killed = first->stop(SIGKILL, Millis(10000));
    ASSERT_TRUE(killed);
    // Nothing could have stopped them: the supervisor is dead.
    ASSERT_TRUE(sleepers->both_alive())
        << "the session died with its daemon; the orphan path is not exercised: "
        << sleepers->describe();

    DaemonProcess* second = start_daemon(cfg);
    ASSERT_NE(second, nullptr);
    EXPECT_TRUE(sleepers->both_gone(Millis(0)))
        << "orphans still running after the new daemon said READY=1: " << sleepers->describe();

    // And the new daemon serves sessions.
    auto c = run_cli({"run", "--", "true"});
    ASSERT_NE(c, nullptr);
    const auto e = c->wait_exit(Millis(30000));
    ASSERT_TRUE(e) << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
}

// A client that stops reading stalls the session (backpressure); once it has not read for
// longer than the operation timeout, its session ends. The client here never reads again,
// so the daemon cannot necessarily deliver an EXIT: the test asserts what must hold either
// way, that the session's processes are killed and the connection is closed.
TEST_F(EndToEnd, ClientThatStopsReadingLosesItsSessionAfterTheOperationTimeout) {
    DaemonConfig cfg = config();
    cfg.operation = 1;
    ASSERT_NE(start_daemon(cfg), nullptr);
    auto client = connect_as_account();
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(start_session(*client, {"sh", "-c", "trap '' HUP; echo pid=$$; exec yes"}));
    const auto pid = read_number(*client, "pid=");
    ASSERT_TRUE(pid);
    UniqueFd pidfd = open_pidfd(*pid);
    ASSERT_TRUE(pidfd);
    // From here on the client reads nothing: `yes` fills the socket and the terminal.
    EXPECT_TRUE(wait_pidfd_exit(pidfd.get(), Millis(1000) + kCleanup))
        << "the session of a client that stopped reading is still running";
    // Whatever was queued may still be read; then EXIT (client_stalled) or the end.
    std::optional<protocol::ExitStatus> exit;
    Incoming in;
    for (;;) {
        in = client->next(Millis(10000));
        if (in.kind != Incoming::Kind::Frame || in.frame.type != FrameType::Output) break;
    }
    if (in.kind == Incoming::Kind::Frame && in.frame.type == FrameType::Exit) {
        const auto decoded = protocol::decode_exit(in.frame.text());
        ASSERT_TRUE(decoded) << decoded.error;
        EXPECT_EQ(protocol::to_string(decoded.value->reason), "client_stalled");
        in = client->next(Millis(10000));
    }
    EXPECT_EQ(in.kind, Incoming::Kind::Eof) << "then: " << in.describe();
}

// INPUT sent together with START, before the command has even been started, is held and
// delivered to the command.
TEST_F(EndToEnd, InputSentBeforeTheCommandStartsIsDelivered) {
    ASSERT_NE(start_daemon(), nullptr);
    auto client = connect_as_account();
    ASSERT_NE(client, nullptr);
    UniqueFd cwd = open_work_dir();
    ASSERT_TRUE(cwd);
    auto frames = protocol::encode_frame(
        FrameType::Start,
        protocol::encode(RawClient::start_request(
            {"sh", "-c", "stty -echo; read x; echo got=$x"}, session_env(), cwd.get())));
    const auto input = protocol::encode_frame(FrameType::Input, std::string("early\n"));
    frames.insert(frames.end(), input.begin(), input.end());
    ASSERT_EQ(client->send(frames, {cwd.get()}), 0);
    std::string seen;
    ASSERT_TRUE(client->expect_started(Millis(20000), &seen)) << seen;
    const auto exit = client->read_until_exit(Millis(20000), &seen);
    ASSERT_TRUE(exit) << seen << "; output: " << client->output();
    EXPECT_EQ(exit->shell_status(), 0);
    EXPECT_NE(without_cr(client->output()).find("got=early\n"), std::string::npos)
        << "output: " << client->output();
}

}  // namespace
}  // namespace ptyvisor::itest
