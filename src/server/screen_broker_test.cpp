// The broker with the real worker (PTYVISOR_SCREEN_WORKER, built beside this test) or a
// scripted stand-in for a misbehaving one, and sessions faked as ScreenSubjects: no Server.
#include "server/screen_broker.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "screen/worker_protocol.h"

namespace ptyvisor::server {
namespace {

class FakeSession final : public ScreenSubject {
public:
    explicit FakeSession(std::string id) : id_(std::move(id)), unit_(id_ + ".service") {
        EXPECT_EQ(OutputLog::create("screen-broker-test", OutputLog::kMinCapacity, log_), 0);
    }
    [[nodiscard]] const std::string& id() const override { return id_; }
    [[nodiscard]] const std::string& unit() const override { return unit_; }
    [[nodiscard]] const OutputLog& log() const override { return *log_; }
    [[nodiscard]] protocol::WindowSize size() const override { return size_; }
    [[nodiscard]] bool bulk() const override { return bulk_; }
    [[nodiscard]] bool controller_has_terminal() const override { return has_terminal_; }
    void answer_queries(std::span<const std::uint8_t> bytes) override { answers_.append(bytes.begin(), bytes.end()); }
    void shell_mark(const ShellMark& mark) override { marks_.push_back(mark); }
    void screen_advanced(std::uint64_t offset) override { advanced_ = offset; }

    void write(std::string_view text) {
        log_->append(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    }

    std::string id_, unit_;
    std::unique_ptr<OutputLog> log_;
    protocol::WindowSize size_{24, 80};
    bool bulk_ = false, has_terminal_ = false;
    std::string answers_;
    std::vector<ShellMark> marks_;
    std::uint64_t advanced_ = 0;
};

struct Snapshot {
    bool finished = false, ok = false;
    std::string text;  // the SCREEN payload, or why not
};

class ScreenBrokerTest : public ::testing::Test {
protected:
    void SetUp() override {
        // The worker takes an identity of its own (screen_identity.h): only root may start it.
        if (::geteuid() != 0) GTEST_SKIP() << "the screen worker changes its uid: run as root";
        sd_event* e = nullptr;
        ASSERT_GE(sd_event_new(&e), 0);
        loop_.reset(e);
    }

    void TearDown() override {
        std::error_code ec;
        if (!scripts_.empty()) std::filesystem::remove_all(scripts_, ec);
    }

    std::unique_ptr<ScreenBroker> make_broker(std::string worker = PTYVISOR_SCREEN_WORKER,
                                              std::uint64_t reply_timeout_usec = 5'000'000) {
        ScreenBroker::Options options;
        options.worker_path = std::move(worker);
        options.reply_timeout_usec = reply_timeout_usec;
        return std::make_unique<ScreenBroker>(loop_.get(), options, [] { return false; });
    }

    // A stand-in for the worker: a shell script (the socket is its descriptor 3).
    std::string fake_worker(const std::string& body) {
        if (scripts_.empty()) {
            char dir[] = "/tmp/screen-broker-test-XXXXXX";
            EXPECT_NE(::mkdtemp(dir), nullptr);
            scripts_ = dir;
        }
        const std::string path = scripts_ + "/worker" + std::to_string(++script_count_);
        std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
        EXPECT_EQ(::chmod(path.c_str(), 0700), 0);
        return path;
    }

    // Runs the loop until `done`; false if it is not done within 30 s of the clock.
    bool run_until(const std::function<bool()>& done) {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!done()) {
            if (std::chrono::steady_clock::now() > give_up) return false;
            if (sd_event_run(loop_.get(), 100'000) < 0) return false;
        }
        return true;
    }

    Snapshot snapshot(ScreenBroker& broker, FakeSession& session) {
        Snapshot s;
        broker.snapshot(session, protocol::SnapshotRequest{}, [&](bool ok, std::string text) {
            s.finished = true;
            s.ok = ok;
            s.text = std::move(text);
        });
        EXPECT_FALSE(s.finished);  // never inside the call
        EXPECT_TRUE(run_until([&] { return s.finished; }));
        return s;
    }

    // The screen's lines, or a failure.
    std::vector<std::string> lines(ScreenBroker& broker, FakeSession& session) {
        const Snapshot s = snapshot(broker, session);
        EXPECT_TRUE(s.ok) << s.text;
        if (!s.ok) return {};
        auto decoded = protocol::decode_screen(s.text);
        EXPECT_TRUE(decoded) << decoded.error;
        if (!decoded) return {};
        EXPECT_EQ(decoded.value->id, session.id());
        return decoded.value->lines;
    }

    EventLoop loop_;
    std::string scripts_;
    int script_count_ = 0;
};

TEST_F(ScreenBrokerTest, TheScreenShowsWhatTheSessionWrote) {
    auto broker = make_broker();
    broker->start();
    ASSERT_NE(broker->worker_pid(), 0);
    FakeSession session("s1");
    session.write("hello\r\n");  // replayed from the log at Open
    broker->log_opened(session);
    session.write("world");  // told with an Advance
    broker->log_changed(session);
    const auto screen = lines(*broker, session);
    ASSERT_EQ(screen.size(), 24u);
    EXPECT_EQ(screen[0], "hello");
    EXPECT_EQ(screen[1], "world");
    broker->log_closed(session);
}

TEST_F(ScreenBrokerTest, QueriesAreAnsweredUnlessTheControllerHasATerminal) {
    auto broker = make_broker();
    broker->start();
    FakeSession answered("answered"), relayed("relayed");
    relayed.has_terminal_ = true;
    broker->log_opened(answered);
    broker->log_opened(relayed);
    for (FakeSession* s : {&answered, &relayed}) {
        s->write("\x1b[6n");  // where is the cursor?
        broker->log_changed(*s);
    }
    ASSERT_TRUE(run_until([&] { return !answered.answers_.empty(); }));
    EXPECT_EQ(answered.answers_, "\x1b[1;1R");
    // The worker answers in order: by the snapshot's reply, the Advance's came too.
    lines(*broker, relayed);
    EXPECT_EQ(relayed.answers_, "");
    broker->log_closed(answered);
    broker->log_closed(relayed);
}

TEST_F(ScreenBrokerTest, ABulkSessionIsToldOfItsOutputAfterTheBatchDelay) {
    auto broker = make_broker();
    broker->start();
    FakeSession session("bulk");
    session.bulk_ = true;
    broker->log_opened(session);
    session.write("\x1b[6n");
    broker->log_changed(session);  // fewer than kBulkAdvanceBytes: waits for the batch timer
    ASSERT_TRUE(run_until([&] { return !session.answers_.empty(); }));
    EXPECT_EQ(session.answers_, "\x1b[1;1R");
    broker->log_closed(session);
}

TEST_F(ScreenBrokerTest, AKilledWorkerIsRestartedAndRebuildsTheScreen) {
    auto broker = make_broker();
    broker->start();
    FakeSession session("s1");
    broker->log_opened(session);
    session.write("before ");
    broker->log_changed(session);
    ASSERT_EQ(lines(*broker, session).at(0), "before");
    const pid_t first = broker->worker_pid();
    ASSERT_GT(first, 0);
    ASSERT_EQ(::kill(first, SIGKILL), 0);
    ASSERT_TRUE(run_until([&] { return broker->worker_pid() == 0; }));
    const Snapshot while_down = snapshot(*broker, session);
    EXPECT_FALSE(while_down.ok);
    EXPECT_NE(while_down.text.find("not running"), std::string::npos) << while_down.text;
    session.write("after");
    broker->log_changed(session);  // nobody to tell: the log keeps it
    ASSERT_TRUE(run_until([&] { return broker->worker_pid() != 0; }));
    EXPECT_NE(broker->worker_pid(), first);
    EXPECT_EQ(broker->starts(), 2u);
    EXPECT_EQ(lines(*broker, session).at(0), "before after");
    broker->log_closed(session);
}

TEST_F(ScreenBrokerTest, AMalformedOrLyingReplyKillsTheWorker) {
    // Each writes one message and then waits on its socket, never exiting by itself.
    const std::vector<std::string> replies = {
        "\\001\\000\\000\\000\\143",  // type 99: no such message
        "\\015\\000\\000\\000\\145\\007\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000",  // Advanced of session 7: unknown
        "\\377\\377\\377\\377\\145",  // longer than any message may be
    };
    for (const auto& reply : replies) {
        SCOPED_TRACE(reply);
        auto broker = make_broker(fake_worker("printf '" + reply + "' >&3\nexec cat <&3 >/dev/null"));
        broker->start();
        const pid_t first = broker->worker_pid();
        ASSERT_GT(first, 0);
        ASSERT_TRUE(run_until([&] { return broker->worker_pid() != first; }));
        EXPECT_EQ(::kill(first, 0), -1);  // killed and reaped
    }
}

TEST_F(ScreenBrokerTest, MarksReachTheSessionInOrderAndAgainFromARestartedWorker) {
    auto broker = make_broker();
    broker->start();
    FakeSession session("shell");
    session.write("\x1b]7;file://host/srv\x07");  // replayed at Open: 20 bytes
    broker->log_opened(session);
    session.write("\x1b]133;A\x07$ \x1b]133;B\x07x\r\n\x1b]133;C;cmdline_url=x\x07out\r\n");
    const std::uint64_t end_start = session.log().end();
    session.write("\x1b]133;D;3\x07");
    broker->log_changed(session);
    ASSERT_TRUE(run_until([&] { return session.marks_.size() == 5; }));
    using Kind = ShellMark::Kind;
    const std::vector<std::pair<Kind, std::uint64_t>> expected = {
        {Kind::Cwd, 20}, {Kind::Prompt, 28}, {Kind::CommandInput, 38}, {Kind::OutputStart, 63}, {Kind::CommandEnd, end_start}};
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(session.marks_[i].kind, expected[i].first) << i;
        EXPECT_EQ(session.marks_[i].offset, expected[i].second) << i;
    }
    EXPECT_EQ(session.marks_[0].text, "/srv");
    EXPECT_EQ(session.marks_[3].text, "x");
    EXPECT_EQ(session.marks_[4].exit_code, 3);
    EXPECT_FALSE(session.marks_[1].exit_code);
    // A new worker replays the log, and with it the marks: the session is told them again.
    const pid_t first = broker->worker_pid();
    ASSERT_EQ(::kill(first, SIGKILL), 0);
    ASSERT_TRUE(run_until([&] { return session.marks_.size() == 10; }));
    EXPECT_NE(broker->worker_pid(), first);
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(session.marks_[5 + i].kind, expected[i].first) << i;
        EXPECT_EQ(session.marks_[5 + i].offset, expected[i].second) << i;
    }
    broker->log_closed(session);
}

// A message as printf(1) escapes.
std::string printf_escaped(const std::vector<std::uint8_t>& bytes) {
    std::string escaped;
    for (const std::uint8_t b : bytes) {
        char octal[8];
        std::snprintf(octal, sizeof octal, "\\%03o", b);
        escaped += octal;
    }
    return escaped;
}

// A Mark message as a worker writes it, as printf(1) escapes.
std::string mark_message(std::uint32_t session, std::uint8_t kind, std::uint64_t offset, std::int32_t exit_code,
                         std::string_view text) {
    return printf_escaped(screen::Writer(screen::MessageType::Mark).put(session).put(kind).put(offset).put(exit_code)
                              .put_bytes(text).finish());
}

TEST_F(ScreenBrokerTest, AMalformedMarkKillsTheWorker) {
    const std::string valid = mark_message(1, 1, 2, -1, "");
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"kind 0", mark_message(1, 0, 3, -1, "")},
        {"kind 6", mark_message(1, 6, 3, -1, "")},
        {"text too long", mark_message(1, 5, 3, -1, "/" + std::string(ShellMark::kMaxText, 'a'))},
        {"text not UTF-8", mark_message(1, 5, 3, -1, "/\xff")},
        {"text on a prompt", mark_message(1, 1, 3, -1, "x")},
        {"exit code 256", mark_message(1, 4, 3, 256, "")},
        {"exit code on a prompt", mark_message(1, 1, 3, 0, "")},
        {"offset past the log's end", mark_message(1, 1, 11, -1, "")},
        {"offset before the last mark's", mark_message(1, 1, 1, -1, "")},
        {"unknown session", mark_message(7, 1, 3, -1, "")},
        {"no exit code", printf_escaped(screen::Writer(screen::MessageType::Mark).put(std::uint32_t{1})
                                            .put(std::uint8_t{1}).put(std::uint64_t{3}).finish())},
    };
    for (const auto& [why, message] : bad) {
        SCOPED_TRACE(why);
        // The first mark is valid: it reaches the session; the second kills the worker.
        auto broker = make_broker(fake_worker("printf '" + valid + message + "' >&3\nexec cat <&3 >/dev/null"));
        broker->start();
        FakeSession session("s");
        session.write("0123456789");  // the log's end, as the worker is told at Open
        broker->log_opened(session);
        const pid_t first = broker->worker_pid();
        ASSERT_GT(first, 0);
        ASSERT_TRUE(run_until([&] { return broker->worker_pid() != first; }));
        EXPECT_EQ(::kill(first, 0), -1);  // killed and reaped
        ASSERT_FALSE(session.marks_.empty());
        for (const ShellMark& m : session.marks_) {
            EXPECT_EQ(m.kind, ShellMark::Kind::Prompt);
            EXPECT_EQ(m.offset, 2u);
        }
        broker->log_closed(session);
    }
}

TEST_F(ScreenBrokerTest, MarksOfASessionClosedWhileTheyWereOwedAreDropped) {
    // The worker sends the closed session's mark and Advanced (owed: the Open was in flight),
    // then the next session's mark, which arrives only if the first two did not kill it.
    const std::string closed_reply = mark_message(1, 1, 0, -1, "") +
                                     printf_escaped(screen::Writer(screen::MessageType::Advanced)
                                                        .put(std::uint32_t{1})
                                                        .put(std::uint64_t{0})
                                                        .finish());
    auto broker = make_broker(
        fake_worker("printf '" + closed_reply + mark_message(2, 2, 0, -1, "") + "' >&3\nexec cat <&3 >/dev/null"));
    broker->start();
    const pid_t first = broker->worker_pid();
    ASSERT_GT(first, 0);
    FakeSession closed("closed"), open("open");
    broker->log_opened(closed);
    broker->log_closed(closed);
    broker->log_opened(open);
    ASSERT_TRUE(run_until([&] { return !open.marks_.empty(); }));
    EXPECT_EQ(open.marks_[0].kind, ShellMark::Kind::CommandInput);
    EXPECT_TRUE(closed.marks_.empty());
    EXPECT_EQ(broker->worker_pid(), first);
    broker->log_closed(open);
}

TEST_F(ScreenBrokerTest, ASessionWhoseOutputCostsTheReplyTimeoutLosesItsScreen) {
    // A worker that spins, never answering: each spends its CPU timeout on the session's
    // work, which takes a strike each time, until its screen is turned off.
    auto broker = make_broker(fake_worker("while :; do :; done"), 50'000);
    broker->start();
    FakeSession session("costly");
    broker->log_opened(session);
    // A worker starved of CPU on a loaded machine is killed without a strike: then it takes
    // more attempts, each a SNAPSHOT that fails.
    Snapshot s;
    for (int attempt = 0; attempt < 20; ++attempt) {
        ASSERT_TRUE(run_until([&] { return broker->worker_pid() != 0; }));
        s = snapshot(*broker, session);
        if (s.text.find("screen is off") != std::string::npos) break;
    }
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.text.find("screen is off"), std::string::npos) << s.text;
    EXPECT_GE(broker->starts(), 1u + ScreenBroker::kMaxStrikes);
    broker->log_closed(session);
}

}  // namespace
}  // namespace ptyvisor::server
