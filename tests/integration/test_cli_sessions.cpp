// The session commands of the CLI (run --detach, ls, attach, logs, send, wait, kill) against
// the real daemon, as the agent's account runs them: what they print and how they exit.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "protocol/session_payloads.h"
#include "support/fixture.h"

extern char** environ;

namespace ptyvisor::itest {
namespace {

constexpr Millis kExit{30000};

// The terminal bytes of `seq FROM TO`: the terminal turns each \n into \r\n.
std::string seq_output(int from, int to) {
    std::string out;
    for (int i = from; i <= to; ++i) out += std::to_string(i) + "\r\n";
    return out;
}

// SHA-256 of `bytes` in hex, computed by sha256sum(1) in a child; "" after a failure.
std::string sha256(const std::string& bytes) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return {};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    char arg0[] = "sha256sum";
    char* argv[] = {arg0, nullptr};
    pid_t pid = -1;
    const int e = ::posix_spawnp(&pid, "sha256sum", &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    if (e != 0) {
        ::close(in[1]);
        ::close(out[0]);
        ADD_FAILURE() << "cannot run sha256sum: " << std::strerror(e);
        return {};
    }
    // sha256sum reads everything before it writes its one line: no deadlock.
    for (std::size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::write(in[1], bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
    }
    ::close(in[1]);
    std::string line;
    char buffer[256];
    for (ssize_t n; (n = ::read(out[0], buffer, sizeof buffer)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        line.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || line.size() < 64) {
        ADD_FAILURE() << "sha256sum failed: " << line;
        return {};
    }
    return line.substr(0, 64);
}

class CliSessions : public EndToEnd {
protected:
    struct Result {
        int status = -1;
        std::string out, err;
        std::string transcript;
    };

    // `ptyvisor ARGS...` to its end.
    Result cli(const std::vector<std::string>& args, Millis timeout = kExit,
               ClientOptions::Stdin mode = ClientOptions::Stdin::Null) {
        auto c = run_cli(args, mode);
        if (!c) return {};
        return finish(*c, timeout);
    }
    static Result finish(ClientProcess& c, Millis timeout = kExit) {
        const auto exit = c.wait_exit(timeout);
        if (!exit) ADD_FAILURE() << "the CLI did not exit; " << c.transcript();
        return {exit ? exit->shell() : -1, c.out(), c.err(), c.transcript()};
    }

    // `ptyvisor run --detach -- ARGV...`: the id it printed.
    std::string run_detached(const std::vector<std::string>& argv) {
        std::vector<std::string> args{"run", "--detach", "--"};
        args.insert(args.end(), argv.begin(), argv.end());
        const auto r = cli(args);
        EXPECT_EQ(r.status, 0) << r.transcript;
        if (r.out.size() != 33 || r.out.back() != '\n') {
            ADD_FAILURE() << "run --detach did not print an id alone on its line; " << r.transcript;
            return {};
        }
        const std::string id = r.out.substr(0, 32);
        EXPECT_TRUE(protocol::is_session_id(id)) << id;
        EXPECT_EQ(r.err, "");
        return id;
    }

    nlohmann::json ls_json() {
        const auto r = cli({"ls", "--json"});
        EXPECT_EQ(r.status, 0) << r.transcript;
        auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
        EXPECT_TRUE(j.is_array()) << r.out;
        return j.is_array() ? j : nlohmann::json::array();
    }
    nlohmann::json find(const nlohmann::json& sessions, const std::string& id) {
        for (const auto& s : sessions)
            if (s.value("id", "") == id) return s;
        ADD_FAILURE() << "session " << id << " is not listed: " << sessions.dump();
        return nlohmann::json::object();
    }

    // The session's log, as `ptyvisor logs` prints it.
    std::string log_of(const std::string& id) {
        const auto r = cli({"logs", id});
        EXPECT_EQ(r.status, 0) << r.transcript;
        return r.out;
    }

    // `wait --for text:PATTERN` that must succeed within 20 s.
    void expect_text(const std::string& id, const std::string& pattern) {
        const auto r = cli({"wait", "--timeout", "20", "--for", "text:" + pattern, id});
        EXPECT_EQ(r.status, 0) << "waiting for /" << pattern << "/; " << r.transcript << "\nlog: " << log_of(id);
    }
};

TEST_F(CliSessions, RunDetachPrintsTheIdAndTheSessionOutlivesTheClient) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = run_detached({"sh", "-c", "echo started; read line; echo got $line; exit 4"});
    ASSERT_FALSE(id.empty());
    // The client has exited; the session goes on, and takes input later.
    const auto s = find(ls_json(), id);
    EXPECT_EQ(s.value("state", ""), "running");
    EXPECT_EQ(s.value("detached", false), true);
    expect_text(id, "started");
    EXPECT_EQ(cli({"send", id, "later\r"}).status, 0);
    const auto w = cli({"wait", "--timeout", "20", id});
    EXPECT_EQ(w.status, 4) << "wait for exit exits with the session's status; " << w.transcript;
    EXPECT_EQ(w.out, "");
    EXPECT_NE(log_of(id).find("got later"), std::string::npos);
}

TEST_F(CliSessions, RunDetachReportsAStartThatFails) {
    ASSERT_NE(start_daemon(), nullptr);
    const auto r = cli({"run", "--detach", "--", "/nonexistent/command"});
    EXPECT_EQ(r.status, 255) << r.transcript;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("ptyvisor: "), std::string::npos) << r.transcript;
}

TEST_F(CliSessions, LogsFromStartIsExactlyTheSessionsBytes) {
    DaemonConfig cfg = config();
    cfg.output_log_bytes = 8 << 20;
    ASSERT_NE(start_daemon(cfg), nullptr);
    const int n = 700000;  // 5.2 MiB: more than one READ asks for (4 MiB)
    const std::string id = run_detached({"seq", "1", std::to_string(n)});
    ASSERT_FALSE(id.empty());
    ASSERT_EQ(cli({"wait", "--timeout", "60", id}, Millis(90000)).status, 0);
    const auto r = cli({"logs", "--from", "start", id}, Millis(60000));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "") << "nothing was dropped, so nothing is said";
    const std::string expected = seq_output(1, n);
    EXPECT_EQ(r.out.size(), expected.size());
    const std::string got_hash = sha256(r.out);
    EXPECT_FALSE(got_hash.empty());
    EXPECT_EQ(got_hash, sha256(expected));
    // From an offset: the rest, exactly.
    const auto tail = cli({"logs", "--from", std::to_string(expected.size() - 20), id});
    ASSERT_EQ(tail.status, 0) << tail.transcript;
    EXPECT_EQ(tail.out, expected.substr(expected.size() - 20));
}

TEST_F(CliSessions, LogsSaysWhereItStartsWhenOlderOutputWasDropped) {
    DaemonConfig cfg = config();
    cfg.output_buffer_bytes = 65536;
    cfg.output_log_bytes = 131072;
    ASSERT_NE(start_daemon(cfg), nullptr);
    const int n = 150000;
    const std::string id = run_detached({"seq", "1", std::to_string(n)});
    ASSERT_FALSE(id.empty());
    ASSERT_EQ(cli({"wait", "--timeout", "60", id}, Millis(90000)).status, 0);
    const auto r = cli({"logs", id});
    ASSERT_EQ(r.status, 0) << r.transcript;
    const std::string expected = seq_output(1, n);
    const std::string start = std::to_string(expected.size() - 131072);
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
              "ptyvisor: output before offset " + start + " was dropped; showing from " + start);
    EXPECT_TRUE(r.out == expected.substr(expected.size() - 131072)) << "the newest bytes, exactly";
}

TEST_F(CliSessions, LogsFollowGetsEveryByteOnceAcrossTheReplayAndTheLiveStream) {
    DaemonConfig cfg = config();
    cfg.output_log_bytes = 8 << 20;
    ASSERT_NE(start_daemon(cfg), nullptr);
    // Output before the follower comes (replayed from the log), then, on our word, output
    // while it follows (live), then the end.
    const std::string id =
        run_detached({"sh", "-c", "seq 1 200000; read go; seq 200001 400000; exit 3"});
    ASSERT_FALSE(id.empty());
    expect_text(id, "\\n200000\\r\\n");
    auto follower = run_cli({"logs", "--follow", id});
    ASSERT_NE(follower, nullptr);
    // Everything before the boundary has reached the follower before the rest is asked for.
    const std::string before = seq_output(1, 200000);
    ASSERT_TRUE(follower->read_until([&](const std::string& out) { return out.size() >= before.size(); }, kExit))
        << follower->transcript().substr(0, 2000);
    EXPECT_EQ(cli({"send", id, "go\r"}).status, 0);
    const auto r = finish(*follower, Millis(60000));
    EXPECT_EQ(r.status, 0) << "logs --follow exits 0 when the session ends; " << r.err;
    const std::string expected = before + "go\r\n" + seq_output(200001, 400000);
    EXPECT_EQ(r.out.size(), expected.size());
    EXPECT_EQ(sha256(r.out), sha256(expected)) << "every byte exactly once";
    EXPECT_EQ(r.err, "");
}

TEST_F(CliSessions, LogsFollowFromTheTailGetsOnlyNewOutput) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = run_detached({"sh", "-c", "echo old; read go; echo new"});
    ASSERT_FALSE(id.empty());
    expect_text(id, "old");
    auto follower = run_cli({"logs", "--follow", "--from", "tail", id});
    ASSERT_NE(follower, nullptr);
    // The follower is attached once the session counts it as a client.
    const auto deadline = Clock::now() + Millis(20000);
    while (find(ls_json(), id).value("clients", 0) < 1 && Clock::now() < deadline)
        std::this_thread::sleep_for(Millis(20));  // no event tells another client's attach
    EXPECT_EQ(cli({"send", id, "go\r"}).status, 0);
    const auto r = finish(*follower);
    EXPECT_EQ(r.status, 0) << r.transcript;
    EXPECT_EQ(r.out, "go\r\nnew\r\n");
}

TEST_F(CliSessions, LsListsSessionsAsJsonAndAsATable) {
    ASSERT_NE(start_daemon(), nullptr);
    const auto before = static_cast<long>(std::time(nullptr));
    const std::string running = run_detached({"sh", "-c", "printf 12345; exec sleep 60"});
    const std::string exited = run_detached({"sh", "-c", "exit 3"});
    ASSERT_FALSE(running.empty());
    ASSERT_FALSE(exited.empty());
    expect_text(running, "12345");
    ASSERT_EQ(cli({"wait", "--timeout", "20", exited}).status, 3);

    const auto sessions = ls_json();
    ASSERT_EQ(sessions.size(), 2u) << sessions.dump();
    const auto r = find(sessions, running);
    EXPECT_EQ(r["argv"], (std::vector<std::string>{"sh", "-c", "printf 12345; exec sleep 60"}));
    EXPECT_EQ(r["state"], "running");
    EXPECT_TRUE(r["exit"].is_null());
    EXPECT_EQ(r["offset"], 5);
    EXPECT_EQ(r["clients"], 0);
    EXPECT_EQ(r["detached"], true);
    ASSERT_TRUE(r["created"].is_number_integer());
    EXPECT_GE(r["created"].get<long>(), before - 1);
    EXPECT_LE(r["created"].get<long>(), static_cast<long>(std::time(nullptr)) + 1);
    ASSERT_TRUE(r["cwd"].is_string());
    if (!r["cwd"].get<std::string>().empty()) {
        EXPECT_EQ(r["cwd"], work_);
    }
    const auto e = find(sessions, exited);
    EXPECT_EQ(e["state"], "exited");
    ASSERT_TRUE(e["exit"].is_object()) << e.dump();
    EXPECT_EQ(e["exit"]["code"], 3);

    const auto table = cli({"ls"});
    ASSERT_EQ(table.status, 0) << table.transcript;
    EXPECT_EQ(table.out.substr(0, 2), "ID");
    for (const char* column : {"STATE", "EXIT", "CLIENTS", "OFFSET", "AGE", "COMMAND"})
        EXPECT_NE(table.out.find(column), std::string::npos) << column;
    EXPECT_NE(table.out.find(running + "  running"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find(exited + "  exited "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("sh -c 'exit 3'"), std::string::npos) << table.out;
}

TEST_F(CliSessions, WaitForExitQuietAndTextEachWithItsTimeout) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string sleeper = run_detached({"sleep", "60"});
    const std::string server = run_detached({"sh", "-c", "sleep 0.2; echo server listening on 8080; sleep 60"});
    const std::string busy = run_detached({"sh", "-c", "while :; do echo busy; sleep 0.05; done"});
    const std::string quick = run_detached({"sh", "-c", "echo bye; exit 0"});
    ASSERT_FALSE(sleeper.empty() || server.empty() || busy.empty() || quick.empty());

    auto r = cli({"wait", "--timeout", "0.3", sleeper});
    EXPECT_EQ(r.status, 124) << r.transcript;
    r = cli({"wait", "--timeout", "20", "--for", "text:listening on [0-9]+", server});
    EXPECT_EQ(r.status, 0) << r.transcript;
    r = cli({"wait", "--timeout", "0.3", "--for", "text:never (printed)+", server});
    EXPECT_EQ(r.status, 124) << r.transcript;
    r = cli({"wait", "--timeout", "20", "--for", "quiet:300", server});
    EXPECT_EQ(r.status, 0) << r.transcript;
    r = cli({"wait", "--timeout", "1.5", "--for", "quiet:500", busy});
    EXPECT_EQ(r.status, 124) << r.transcript;
    // A condition that can no longer hold: the session exited first.
    r = cli({"wait", "--timeout", "20", "--for", "text:never", quick});
    EXPECT_EQ(r.status, 1) << r.transcript;
    EXPECT_NE(r.err.find("exited"), std::string::npos) << r.transcript;
    // --from tail: only text that comes after the wait began.
    r = cli({"wait", "--timeout", "0.3", "--for", "text:listening", "--from", "tail", server});
    EXPECT_EQ(r.status, 124) << r.transcript;
    // Bad conditions are ours to refuse.
    r = cli({"wait", "--for", "quiet:0", server});
    EXPECT_EQ(r.status, 255) << r.transcript;
    EXPECT_NE(r.err.find("quiet:0"), std::string::npos) << r.transcript;
}

TEST_F(CliSessions, KillEndsTheSessionAndKillWithASignalSignalsIt) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string a = run_detached({"sleep", "60"});
    const std::string b = run_detached({"sleep", "60"});
    ASSERT_FALSE(a.empty() || b.empty());
    auto r = cli({"kill", a});
    EXPECT_EQ(r.status, 0) << r.transcript;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(find(ls_json(), a).value("state", ""), "exited") << "KILLED came once it had exited";

    r = cli({"kill", "-s", "TERM", b});
    EXPECT_EQ(r.status, 0) << r.transcript;
    r = cli({"wait", "--timeout", "20", b});
    EXPECT_EQ(r.status, 128 + SIGTERM) << r.transcript;
    r = cli({"kill", "-s", "TERM", b});
    EXPECT_EQ(r.status, 255) << "an exited session takes no signal; " << r.transcript;
    EXPECT_NE(r.err.find("session_ended"), std::string::npos) << r.transcript;
    r = cli({"kill", "-s", "NOSUCHSIG", b});
    EXPECT_EQ(r.status, 255) << r.transcript;
    EXPECT_NE(r.err.find("NOSUCHSIG"), std::string::npos) << r.transcript;
}

TEST_F(CliSessions, SendKeysControlCInterruptsASleep) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = run_detached({"sleep", "60"});
    ASSERT_FALSE(id.empty());
    auto r = cli({"send", "--keys", id, "C-c"});
    EXPECT_EQ(r.status, 0) << r.transcript;
    EXPECT_EQ(r.out, "");
    r = cli({"wait", "--timeout", "20", id});
    EXPECT_EQ(r.status, 128 + SIGINT) << "^C reached the terminal and interrupted sleep; " << r.transcript;
}

TEST_F(CliSessions, SendJoinsItsArgumentsAndKeysAreNamed) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = run_detached({"cat"});
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(cli({"send", id, "two", "words"}).status, 0);
    EXPECT_EQ(cli({"send", "--keys", id, " and", "Space", "keys", "Enter"}).status, 0);
    // The terminal's echo, then cat's copy.
    expect_text(id, "two words and keys\\r\\ntwo words and keys\\r\\n");
    EXPECT_EQ(cli({"send", "--keys", id, "C-d"}).status, 0);
    EXPECT_EQ(cli({"wait", "--timeout", "20", id}).status, 0) << "^D ended cat";
}

TEST_F(CliSessions, AnUnknownOrMalformedIdIsRefused) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string nobody(32, 'a');
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"logs", nobody}, {"attach", "--observe", nobody}, {"wait", nobody},
          {"kill", nobody}, {"send", nobody, "x"}, {"logs", "--follow", nobody}}) {
        const auto r = cli(args);
        EXPECT_EQ(r.status, 255) << args[0] << "; " << r.transcript;
        EXPECT_NE(r.err.find("no_such_session"), std::string::npos) << args[0] << "; " << r.transcript;
        EXPECT_EQ(r.out, "");
    }
    const auto r = cli({"logs", "not-an-id"});
    EXPECT_EQ(r.status, 255);
    EXPECT_NE(r.err.find("'not-an-id' is not a session id"), std::string::npos) << r.transcript;
}

TEST_F(CliSessions, AnObserverSeesOutputAndItsInputGoesNowhere) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = run_detached({"cat"});
    ASSERT_FALSE(id.empty());
    auto observer = run_cli({"attach", "--observe", id}, ClientOptions::Stdin::Pipe);
    ASSERT_NE(observer, nullptr);
    EXPECT_EQ(cli({"send", id, "seen by the observer\r"}).status, 0);
    EXPECT_TRUE(observer->wait_for_output("seen by the observer\r\nseen by the observer", Millis(20000)))
        << observer->transcript();
    // What the observer types is not sent (the daemon would refuse it and end the
    // connection): then the detach keys, read after it, end the observer with 0.
    ASSERT_TRUE(observer->write_input("typed by the observer\n"));
    ASSERT_TRUE(observer->write_input("\x10\x11"));
    const auto r = finish(*observer);
    EXPECT_EQ(r.status, 0) << r.transcript;
    EXPECT_EQ(log_of(id).find("typed by the observer"), std::string::npos) << log_of(id);
    const auto s = find(ls_json(), id);
    EXPECT_EQ(s.value("state", ""), "running");
    EXPECT_EQ(s.value("clients", -1), 0);
}

TEST_F(CliSessions, AControllerOnATerminalReplaysTheScreenTypesAndDetachesWithTheKeys) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = run_detached({"sh", "-c", "echo before-attach; read go; stty size; exec cat"});
    ASSERT_FALSE(id.empty());
    expect_text(id, "before-attach");
    auto options = client_options(ClientOptions::Stdin::Pty);
    options.pty_rows = 33;
    options.pty_cols = 111;
    auto controller = run_cli({"attach", id}, options);
    ASSERT_NE(controller, nullptr);
    EXPECT_TRUE(controller->wait_for_output("before-attach", Millis(20000))) << "--from start replays; "
                                                                              << controller->transcript();
    // The session took our terminal's size when we attached (it was started 80x24).
    ASSERT_TRUE(controller->write_input("go\r"));
    EXPECT_TRUE(controller->wait_for_output("33 111", Millis(20000))) << controller->transcript();
    ASSERT_TRUE(controller->write_input("typed on the terminal\r"));
    EXPECT_TRUE(controller->wait_for_output("typed on the terminal\r\ntyped on the terminal", Millis(20000)))
        << controller->transcript();
    ASSERT_TRUE(controller->write_input("\x10\x11"));  // ctrl-p, ctrl-q
    const auto r = finish(*controller);
    EXPECT_EQ(r.status, 0) << r.transcript;
    const auto s = find(ls_json(), id);
    EXPECT_EQ(s.value("state", ""), "running") << "detaching leaves the session running";
    EXPECT_EQ(s.value("clients", -1), 0);
    EXPECT_EQ(log_of(id).find('\x10'), std::string::npos) << "the detach keys never reached the session";
}

TEST_F(CliSessions, AControllerOnAPipeForwardsInputAndDetachesWithItsOwnKeys) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = run_detached({"cat"});
    ASSERT_FALSE(id.empty());
    auto controller = run_cli({"attach", "--from", "tail", "--detach-keys", "ctrl-a,d", id}, ClientOptions::Stdin::Pipe);
    ASSERT_NE(controller, nullptr);
    ASSERT_TRUE(controller->write_input("from the pipe\n"));
    EXPECT_TRUE(controller->wait_for_output("from the pipe\r\nfrom the pipe", Millis(20000))) << controller->transcript();
    // ^A alone is passed on once the next byte shows it is not the sequence.
    ASSERT_TRUE(controller->write_input("\x01x\n\x01" "d"));
    const auto r = finish(*controller);
    EXPECT_EQ(r.status, 0) << r.transcript;
    // The terminal echoes ^A as "^A", and cat copies the byte itself.
    expect_text(id, "\\^Ax\\r\\n\x01x\\r\\n");
    EXPECT_EQ(find(ls_json(), id).value("state", ""), "running");
}

TEST_F(CliSessions, AttachExitsWithTheSessionsStatusWhenItEnds) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = run_detached({"sh", "-c", "read x; echo got $x; exit 7"});
    ASSERT_FALSE(id.empty());
    auto controller = run_cli({"attach", id}, ClientOptions::Stdin::Pipe);
    ASSERT_NE(controller, nullptr);
    ASSERT_TRUE(controller->write_input("go\n"));
    const auto r = finish(*controller);
    EXPECT_EQ(r.status, 7) << r.transcript;
    EXPECT_NE(r.out.find("got go"), std::string::npos) << r.transcript;
}

TEST_F(CliSessions, ASecondControllerIsBusyUnlessItTakesOver) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = run_detached({"cat"});
    ASSERT_FALSE(id.empty());
    auto first = run_cli({"attach", id}, ClientOptions::Stdin::Pipe);
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(first->write_input("first\n"));
    ASSERT_TRUE(first->wait_for_output("first\r\nfirst", Millis(20000))) << first->transcript();
    const auto busy = cli({"attach", id}, kExit, ClientOptions::Stdin::Pipe);
    EXPECT_EQ(busy.status, 255) << busy.transcript;
    EXPECT_NE(busy.err.find("busy"), std::string::npos) << busy.transcript;
    auto second = run_cli({"attach", "--takeover", id}, ClientOptions::Stdin::Pipe);
    ASSERT_NE(second, nullptr);
    const auto r = finish(*first);
    EXPECT_EQ(r.status, 0) << "taken over: the first leaves as if detached; " << r.transcript;
    EXPECT_NE(r.err.find("was taken over"), std::string::npos) << r.transcript;
    ASSERT_TRUE(second->write_input("second\n"));
    EXPECT_TRUE(second->wait_for_output("second\r\nsecond", Millis(20000))) << second->transcript();
    ASSERT_TRUE(second->write_input("\x10\x11"));
    EXPECT_EQ(finish(*second).status, 0);
}

}  // namespace
}  // namespace ptyvisor::itest
