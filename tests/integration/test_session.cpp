// What a user of `ptyvisor run` sees: output, exit status, terminal size, signals from the
// keyboard, input forwarding, environment and working directory.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <regex>

#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using Stdin = ClientOptions::Stdin;
constexpr Millis kExit{30000};

TEST_F(EndToEnd, EchoAndExitCode) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = run_cli({"run", "--", "sh", "-c", "printf hello; exit 7"});
    ASSERT_NE(c, nullptr);
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << "the CLI did not exit; " << c->transcript();
    EXPECT_TRUE(e->exited_with(7)) << e->describe() << "\n" << c->transcript();
    EXPECT_EQ(c->out(), "hello") << c->transcript();
}

TEST_F(EndToEnd, SignalDeathIsReportedAs128PlusSignal) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = run_cli({"run", "--", "sh", "-c", "kill -TERM $$"});
    ASSERT_NE(c, nullptr);
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << c->transcript();
    EXPECT_TRUE(e->exited_with(128 + SIGTERM)) << e->describe() << "\n" << c->transcript();
}

TEST_F(EndToEnd, SizeOptionSetsTheInitialTerminalSize) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = run_cli({"run", "--size", "100x30", "--", "stty", "size"});
    ASSERT_NE(c, nullptr);
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
    EXPECT_EQ(c->out(), "30 100\r\n") << c->transcript();
}

// The session's terminal is the agent's alone: members of its primary group cannot write
// into it (it was 0620, group-writable, with the agent's own group).
TEST_F(EndToEnd, SessionTerminalIsTheAgentsAndNotWritableByItsGroup) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = run_cli({"run", "--", "sh", "-c", "stat -c '%a %U %G' \"$(tty)\""});
    ASSERT_NE(c, nullptr);
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
    // Never the agent's primary group: 0600, or login's 0620 (which systemd sets on a unit's
    // terminal) with the group "tty", whose write access only setgid-tty programs have.
    const std::string tail = " " + account_->name + " tty\r\n";
    EXPECT_TRUE(c->out() == "600" + tail || c->out() == "620" + tail) << c->transcript();
}

// The client runs on a PTY of its own (as under ssh or a terminal emulator). The session
// starts with that terminal's size; resizing the client's terminal reaches the session.
TEST_F(EndToEnd, ResizeOfTheClientTerminalReachesTheSession) {
    ASSERT_NE(start_daemon(), nullptr);
    auto opts = client_options(Stdin::Pty);
    opts.pty_rows = 24;
    opts.pty_cols = 80;
    auto c = run_cli({"run", "--", "sh", "-c", "stty size; while read x; do stty size; done"},
                     opts);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->wait_for_output("24 80\r\n", kExit))
        << "initial size from the client's terminal; " << c->transcript();

    ASSERT_TRUE(c->set_terminal_size(40, 132));
    c->signal(SIGWINCH);  // the kernel sends one too; a second is harmless

    // Each newline makes the session print its size once. The RESIZE travels through the
    // client's signal handling, so a newline typed in the same instant may overtake it:
    // probe until the new size shows, with a bound on the number of probes.
    const std::regex size_line(R"((\d+) (\d+)\r*\n)");
    int probes = 0;
    bool resized = false;
    for (; probes < 20 && !resized; ++probes) {
        const auto before = std::distance(
            std::sregex_iterator(c->out().begin(), c->out().end(), size_line), std::sregex_iterator());
        ASSERT_TRUE(c->write_input("\r")) << c->transcript();
        ASSERT_TRUE(c->read_until(
            [&](const std::string& out) {
                return std::distance(std::sregex_iterator(out.begin(), out.end(), size_line),
                                     std::sregex_iterator()) > before;
            },
            kExit))
            << c->transcript();
        resized = c->text().rfind("40 132\n") != std::string::npos;
    }
    RecordProperty("resize_probes", probes);
    EXPECT_TRUE(resized) << "the session never saw 40x132; " << c->transcript();

    ASSERT_TRUE(c->write_input("\x04"));  // ^D ends the read loop
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
}

// ^C typed on the client's terminal (raw mode: it is just byte 0x03) becomes SIGINT for the
// session's foreground process group, through the session terminal's line discipline.
TEST_F(EndToEnd, CtrlCReachesTheForegroundProcessGroup) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = run_cli({"run", "--", "sh", "-c",
                      // The loop makes it race-free: ^C may land before `wait` begins.
                      "trap 'echo caught; trapped=1' INT; sleep 100 </dev/null >/dev/null 2>&1 & "
                      "echo ready; while [ -z \"$trapped\" ]; do wait; done; echo after; kill $!"},
                     Stdin::Pty);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->wait_for_output("ready\r\n", kExit)) << c->transcript();
    ASSERT_TRUE(c->write_input("\x03"));
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << "^C did not interrupt the session's wait; " << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
    const auto caught = c->out().find("caught");
    EXPECT_NE(caught, std::string::npos) << c->transcript();
    EXPECT_NE(c->out().find("after", caught == std::string::npos ? 0 : caught), std::string::npos)
        << c->transcript();
}

// An interactive shell survives ^C; the foreground `sleep 100` it was running does not.
TEST_F(EndToEnd, CtrlCKillsTheForegroundJobOfAnInteractiveShell) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = run_cli({"run", "-e", "PS1=prompt% ", "--", "sh", "-i"}, Stdin::Pty);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->wait_for_output("prompt% ", kExit)) << c->transcript();
    // The echoed command line reads st''arted; only the command's own output reads started.
    ASSERT_TRUE(c->write_input("echo st''arted; sleep 100\r"));
    ASSERT_TRUE(c->wait_for_output("started\r\n", kExit)) << c->transcript();
    const auto prompts = [](const std::string& s) {
        std::size_t n = 0;
        for (auto at = s.find("prompt% "); at != std::string::npos; at = s.find("prompt% ", at + 1))
            ++n;
        return n;
    };
    const std::size_t before = prompts(c->out());
    // A ^C that lands while the shell is still handing the terminal to `sleep` (between
    // tcsetpgrp and the child's reset of its signal handlers) is lost, as it would be at a
    // real terminal; a user presses ^C again, and so does this test, a bounded number of times.
    bool interrupted = false;
    for (int attempt = 0; attempt < 10 && !interrupted; ++attempt) {
        ASSERT_TRUE(c->write_input("\x03"));
        interrupted = c->read_until([&](const std::string& out) { return prompts(out) > before; }, Millis(2000));
    }
    ASSERT_TRUE(interrupted) << "no new prompt after ^C: the foreground sleep was not interrupted; "
                             << c->transcript();
    ASSERT_TRUE(c->write_input("echo al''ive; exit 0\r"));
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
    EXPECT_NE(c->text().find("alive\n"), std::string::npos) << c->transcript();
}

// stdin not a terminal: input is forwarded and end of input becomes ^D. The session's
// terminal echoes the line (canonical mode) and cat prints it back.
TEST_F(EndToEnd, PipedInputIsForwardedAndEndOfInputEndsTheSession) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = run_cli({"run", "--", "cat"}, Stdin::Pipe);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->write_input("abc\n"));
    c->close_input();
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << "cat did not see end of input; " << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
    EXPECT_EQ(c->out(), "abc\r\nabc\r\n") << c->transcript();
}

TEST_F(EndToEnd, EnvironmentAndWorkingDirectoryComeFromTheRequest) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string sub = work_ + "/sub dir";
    ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
    auto c = run_cli({"run", "-C", sub, "-e", "FOO=bar baz", "--", "sh", "-c",
                      "printf '%s|%s|%s' \"$FOO\" \"$(pwd)\" \"$(id -un)\""});
    ASSERT_NE(c, nullptr);
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
    EXPECT_EQ(c->out(), "bar baz|" + sub + "|" + account_->name) << c->transcript();
}

// A process inside a session runs as the agent's account, so the uid check alone would let
// it in. It must not obtain a session.
TEST_F(EndToEnd, ProcessInsideASessionCannotObtainASession) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string nested = "'" + cli_binary() + "' run -- true; echo \"rc=$?\"";
    auto c = run_cli({"run", "--", "sh", "-c", nested});
    ASSERT_NE(c, nullptr);
    const auto e = c->wait_exit(kExit);
    ASSERT_TRUE(e) << c->transcript();
    EXPECT_TRUE(e->exited_with(0)) << e->describe() << "\n" << c->transcript();
    EXPECT_NE(c->out().find("rc=255"), std::string::npos) << c->transcript();
    EXPECT_NE(c->out().find("not_allowed"), std::string::npos) << c->transcript();
}

}  // namespace
}  // namespace ptyvisor::itest
