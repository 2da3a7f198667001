// Sessions survive the daemon (issue 16; docs/operations.md, "What survives what"): a SIGHUP
// re-execs ptyvisord, which hands every running session to its next self and takes it back.
// Spoken at the wire, with a stream whose every byte is known, so that a byte lost or sent
// twice across the re-exec shows as a difference. Both backends (tests/systemd/run.sh runs
// this binary with PTYVISOR_TEST_BACKEND=systemd); the fd store is tests/systemd/restart.sh's.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "protocol/session_payloads.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

constexpr Millis kReply{20000};

std::string seq_output(int from, int to) {
    std::string out;
    for (int i = from; i <= to; ++i) out += std::to_string(i) + "\r\n";
    return out;
}

// Prints 1..3000, waits for a line, prints 3001..6000, waits again, prints 6001..9000. The
// terminal echoes each line sent ("a\n" -> "a\r\n") before the next numbers.
const std::vector<std::string> kGatedStream = {
    "sh", "-c", "seq 1 3000; read a; seq 3001 6000; read b; seq 6001 9000"};
const std::string kGatedExpected =
    seq_output(1, 3000) + "a\r\n" + seq_output(3001, 6000) + "b\r\n" + seq_output(6001, 9000);

class Restart : public EndToEnd {
protected:
    // One request on a fresh connection; every frame until the daemon closes. A connection
    // made while the daemon re-execs waits in the listener's backlog for the next run.
    std::vector<protocol::Frame> request(FrameType type, const std::string& payload) {
        std::vector<protocol::Frame> frames;
        auto c = connect_as_account();
        if (!c) return frames;
        if (const int e = c->send_frame(type, payload); e != 0) {
            ADD_FAILURE() << "send: " << std::strerror(-e);
            return frames;
        }
        for (;;) {
            auto in = c->next(kReply);
            if (in.kind != Incoming::Kind::Frame) {
                if (in.kind != Incoming::Kind::Eof) ADD_FAILURE() << "waiting for the reply: " << in.describe();
                return frames;
            }
            frames.push_back(std::move(in.frame));
        }
    }

    std::vector<protocol::SessionInfo> list() {
        const auto frames = request(FrameType::List, "");
        if (frames.size() != 1 || frames.front().type != FrameType::Sessions) {
            ADD_FAILURE() << "no SESSIONS";
            return {};
        }
        auto d = protocol::decode_sessions(frames.front().text());
        return d ? *d.value : std::vector<protocol::SessionInfo>{};
    }

    bool send_input(const std::string& id, const std::string& text) {
        const std::vector<std::uint8_t> bytes(text.begin(), text.end());
        const auto payload = protocol::encode_send(id, bytes);
        const auto frames = request(FrameType::Send, std::string(payload.begin(), payload.end()));
        return frames.size() == 1 && frames.front().type == FrameType::Sent;
    }

    std::optional<protocol::WaitReply> wait_exit(const std::string& id) {
        protocol::WaitRequest w;
        w.id = id;
        w.timeout_ms = 15000;
        const auto frames = request(FrameType::Wait, protocol::encode(w));
        if (frames.size() != 1 || frames.front().type != FrameType::Waited) return std::nullopt;
        return protocol::decode_waited(frames.front().text()).value;
    }

    // Waits until the log holds a match of `pattern` (RE2).
    bool wait_text(const std::string& id, const std::string& pattern) {
        protocol::WaitRequest w;
        w.id = id;
        w.what = protocol::WaitRequest::For::Text;
        w.pattern = pattern;
        w.timeout_ms = 15000;
        const auto frames = request(FrameType::Wait, protocol::encode(w));
        if (frames.size() != 1 || frames.front().type != FrameType::Waited) return false;
        const auto reply = protocol::decode_waited(frames.front().text());
        return reply && reply.value->matched;
    }

    // The whole log, from offset 0.
    std::string read_all(const std::string& id) {
        const auto frames = request(FrameType::Read, protocol::encode(protocol::ReadRequest{
                                                         id, {protocol::LogPosition::Kind::Offset, 0}, 1 << 20}));
        std::string bytes;
        for (std::size_t i = 1; i < frames.size(); ++i) bytes.append(frames[i].text());
        return bytes;
    }

    std::unique_ptr<RawClient> attach_observer(const std::string& id, std::uint64_t from) {
        auto c = connect_as_account();
        if (!c) return nullptr;
        protocol::AttachRequest a{id, {protocol::LogPosition::Kind::Offset, from}, true, false};
        if (c->send_frame(FrameType::Attach, protocol::encode(a)) != 0) return nullptr;
        auto in = c->next(kReply);
        if (in.kind != Incoming::Kind::Frame || in.frame.type != FrameType::Attached) {
            ADD_FAILURE() << "no ATTACHED: " << in.describe();
            return nullptr;
        }
        return c;
    }

    // Appends every OUTPUT to `out` until the connection ends (EOF) or EXIT comes.
    static bool read_until_end(RawClient& c, std::string& out, bool& exited) {
        exited = false;
        for (;;) {
            auto in = c.next(kReply);
            if (in.kind == Incoming::Kind::Eof) return true;
            if (in.kind != Incoming::Kind::Frame) {
                ADD_FAILURE() << "reading output: " << in.describe();
                return false;
            }
            if (in.frame.type == FrameType::Output) out.append(in.frame.text());
            if (in.frame.type == FrameType::Exit) {
                exited = true;
                return true;
            }
        }
    }

    // SIGHUP, then waits for the old run to go: an observer of `id` sees its connection end.
    // (A request the old run accepted but had not answered is lost with it.)
    void reexec_and_wait(DaemonProcess& d, const std::string& id) {
        auto watcher = attach_observer(id, 0);
        ASSERT_NE(watcher, nullptr);
        ASSERT_EQ(::kill(d.pid(), SIGHUP), 0);
        std::string ignored;
        bool exited = false;
        ASSERT_TRUE(read_until_end(*watcher, ignored, exited));
        ASSERT_FALSE(exited);
    }

    std::string read_session_record(const std::string& unit) {
        return read_text_file(state_ + "/sessions/" + unit);
    }
};

TEST_F(Restart, ADetachedSessionSurvivesAReexecWithNoByteLostOrRepeated) {
    auto* d = start_daemon();
    ASSERT_NE(d, nullptr);
    const pid_t daemon_pid = d->pid();
    const std::string id = start_detached(kGatedStream);
    ASSERT_FALSE(id.empty());

    // An observer reads from the first byte, across the re-exec, and then from where it was.
    auto observer = attach_observer(id, 0);
    ASSERT_NE(observer, nullptr);
    ASSERT_TRUE(observer->read_output_until("\r\n3000\r\n", kReply));
    std::string seen = observer->output();
    ASSERT_TRUE(send_input(id, "a\n"));
    // The program prints 3001..6000 while the daemon goes and comes back.
    ASSERT_EQ(::kill(daemon_pid, SIGHUP), 0);
    bool exited = false;
    ASSERT_TRUE(read_until_end(*observer, seen, exited));
    ASSERT_FALSE(exited) << "the session ended at the re-exec";

    const auto sessions = list();  // served by the next run
    ASSERT_EQ(sessions.size(), 1u);
    EXPECT_EQ(sessions.front().id, id);
    EXPECT_EQ(sessions.front().state, protocol::State::Running);
    EXPECT_EQ(d->pid(), daemon_pid);
    EXPECT_TRUE(d->running());
    EXPECT_NE(d->log().find("session taken back"), std::string::npos) << d->log();

    auto again = attach_observer(id, seen.size());
    ASSERT_NE(again, nullptr);
    ASSERT_TRUE(wait_text(id, "\\n6000\\r\\n"));  // the program waits for its second line
    ASSERT_TRUE(send_input(id, "b\n"));
    ASSERT_TRUE(read_until_end(*again, seen, exited));
    EXPECT_TRUE(exited);
    EXPECT_EQ(seen.size(), kGatedExpected.size());
    EXPECT_TRUE(seen == kGatedExpected) << "the observer's bytes differ from the stream";

    const auto status = wait_exit(id);
    ASSERT_TRUE(status);
    ASSERT_TRUE(status->exit);
    EXPECT_EQ(status->exit->code, 0);
    const std::string log = read_all(id);
    EXPECT_EQ(log.size(), kGatedExpected.size());
    EXPECT_TRUE(log == kGatedExpected) << "the log's bytes differ from the stream";
}

TEST_F(Restart, SeveralReexecsInARowKeepEverySession) {
    auto* d = start_daemon();
    ASSERT_NE(d, nullptr);
    std::vector<std::string> ids;
    for (int i = 0; i < 4; ++i) {
        ids.push_back(start_detached(kGatedStream));
        ASSERT_FALSE(ids.back().empty());
    }
    for (int round = 0; round < 3; ++round) {
        reexec_and_wait(*d, ids.front());
        const auto sessions = list();
        ASSERT_EQ(sessions.size(), ids.size()) << "round " << round << "\n" << d->log();
    }
    for (const auto& id : ids) {
        // Each line once the program waits for it, so that its echo lands where expected.
        ASSERT_TRUE(wait_text(id, "\\n3000\\r\\n"));
        ASSERT_TRUE(send_input(id, "a\n"));
        ASSERT_TRUE(wait_text(id, "\\n6000\\r\\n"));
        ASSERT_TRUE(send_input(id, "b\n"));
    }
    for (const auto& id : ids) {
        const auto status = wait_exit(id);
        ASSERT_TRUE(status);
        EXPECT_TRUE(status->exit);
        const std::string log = read_all(id);
        EXPECT_EQ(log.size(), kGatedExpected.size()) << "session " << id;
        EXPECT_TRUE(log == kGatedExpected) << "session " << id;
    }
    EXPECT_TRUE(d->running());
}

TEST_F(Restart, ASessionThatCannotBeTakenBackIsCleanedUp) {
    if (backend() != "direct") GTEST_SKIP() << "the session record it removes is the direct backend's";
    auto* d = start_daemon();
    ASSERT_NE(d, nullptr);
    const std::string kept = start_detached({"sleep", "600"});
    const std::string lost = start_detached({"sleep", "600"});
    ASSERT_FALSE(kept.empty());
    ASSERT_FALSE(lost.empty());
    pid_t lost_pid = 0;
    std::string lost_unit;
    for (const auto& s : list())
        if (s.id == lost) {
            lost_pid = static_cast<pid_t>(s.pid);
            lost_unit = s.unit;
        }
    ASSERT_GT(lost_pid, 1);
    UniqueFd lost_process = open_pidfd(lost_pid);
    ASSERT_TRUE(lost_process);
    // Without its record the next run cannot tell the session is its own: it must not adopt
    // it, and must leave nothing of it behind.
    ASSERT_FALSE(read_session_record(lost_unit).empty());
    ASSERT_EQ(::unlink((state_ + "/sessions/" + lost_unit).c_str()), 0);
    reexec_and_wait(*d, kept);
    const auto sessions = list();
    ASSERT_EQ(sessions.size(), 1u) << d->log();
    EXPECT_EQ(sessions.front().id, kept);
    EXPECT_TRUE(wait_pidfd_exit(lost_process.get(), Millis(15000))) << "the session not taken back still runs";
    // ... and reaped: it was the old run's child, so the new run must not keep it a zombie.
    // Nothing outside the daemon can wait for a reap, so the check converges within a bound.
    const std::string proc = "/proc/" + std::to_string(lost_pid);
    const auto until = std::chrono::steady_clock::now() + Millis(10000);
    while (::access(proc.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < until) ::usleep(10000);
    EXPECT_NE(::access(proc.c_str(), F_OK), 0) << "the process not taken back is left a zombie";
    EXPECT_NE(d->log().find("cannot take back a session"), std::string::npos) << d->log();
    EXPECT_TRUE(d->running());
}

// `ptyvisor run` whose daemon re-execs mid-stream: the client connects again, attaches by id
// from the next offset it expected, and its stdout is the stream, byte for byte.
TEST_F(Restart, PtyvisorRunReattachesAcrossAReexecAndItsOutputIsExact) {
    auto* d = start_daemon();
    ASSERT_NE(d, nullptr);
    // Long enough that the re-exec lands while the program writes (either way the bytes are
    // checked); the log (2 MiB) holds what nobody reads meanwhile.
    auto cli = run_cli({"run", "--", "sh", "-c", "seq 1 3000; read a; seq 3001 150000; read b; seq 150001 150100"},
                       ClientOptions::Stdin::Pipe);
    ASSERT_NE(cli, nullptr);
    ASSERT_TRUE(cli->wait_for_output("\n3000\n", kReply)) << cli->transcript();
    ASSERT_TRUE(cli->write_input("a\n"));
    ASSERT_TRUE(cli->wait_for_output("\n3001\n", kReply)) << cli->transcript();
    ASSERT_EQ(::kill(d->pid(), SIGHUP), 0);
    ASSERT_TRUE(cli->wait_for_output("\n150000\n", Millis(60000))) << cli->transcript() << d->log();
    ASSERT_TRUE(cli->write_input("b\n"));
    const auto exit = cli->wait_exit(kReply);
    ASSERT_TRUE(exit) << cli->transcript();
    EXPECT_TRUE(exit->exited_with(0)) << exit->describe() << cli->transcript();
    const std::string expected =
        seq_output(1, 3000) + "a\r\n" + seq_output(3001, 150000) + "b\r\n" + seq_output(150001, 150100);
    EXPECT_EQ(cli->out().size(), expected.size());
    EXPECT_TRUE(cli->out() == expected) << "stdout differs from the stream";
    EXPECT_NE(d->log().find("session taken back"), std::string::npos) << d->log();
}

// A session bound to its connection whose client does not come back within the grace ends
// as a disconnect does.
TEST_F(Restart, ABoundSessionWhoseClientDoesNotComeBackEndsAfterTheGrace) {
    DaemonConfig cfg = config();
    cfg.reattach = 1;
    auto* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    const auto started = start_session(*c, {"sleep", "600"});
    ASSERT_TRUE(started);
    const pid_t main_pid = static_cast<pid_t>(started->pid);
    UniqueFd process = open_pidfd(main_pid);
    ASSERT_TRUE(process);
    ASSERT_EQ(::kill(d->pid(), SIGHUP), 0);
    ASSERT_TRUE(c->expect_eof(kReply)) << "the old run's connection did not end";  // it is gone
    const auto sessions = list();
    ASSERT_EQ(sessions.size(), 1u) << d->log();
    EXPECT_FALSE(sessions.front().detached);
    // Nobody attaches: after 1 s the session ends, its processes with it.
    EXPECT_TRUE(wait_pidfd_exit(process.get(), Millis(20000))) << d->log();
    EXPECT_NE(d->log().find("did not come back"), std::string::npos) << d->log();
    EXPECT_TRUE(d->running());
}

}  // namespace
}  // namespace ptyvisor::itest
