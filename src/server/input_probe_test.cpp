#include "server/input_probe.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/unique_fd.h"
#include "server/testing/terminal_program.h"

namespace ptyvisor::server {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using State = InputWait::State;
using testing::TerminalProgram;

const char* state_name(State state) {
    switch (state) {
        case State::Waiting: return "Waiting";
        case State::Busy: return "Busy";
        case State::Unknown: return "Unknown";
    }
    return "?";
}

// The first of `names` found on PATH, or "".
std::string find_program(const std::vector<std::string>& names) {
    const char* path = ::getenv("PATH");
    std::string directories = path ? path : "/usr/bin:/bin";
    for (const std::string& name : names) {
        std::size_t start = 0;
        while (start <= directories.size()) {
            std::size_t end = directories.find(':', start);
            if (end == std::string::npos) end = directories.size();
            const std::string candidate = directories.substr(start, end - start) + "/" + name;
            if (::access(candidate.c_str(), X_OK) == 0) return candidate;
            start = end + 1;
        }
    }
    return "";
}


// Probes until the answer is `expected` or `limit` passes, waiting between probes for output
// or a backoff (1 ms doubling to 50 ms): the kernel has no event for "now blocked on the tty".
InputWait await_state(TerminalProgram& program, State expected, int session_cgroup = -1,
                      std::chrono::seconds limit = 10s) {
    const auto deadline = Clock::now() + limit;
    auto backoff = 1ms;
    for (;;) {
        InputWait answer = program.probe(session_cgroup);
        if (answer.state == expected || Clock::now() >= deadline) return answer;
        program.read_output(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
    }
}

void expect_waiting(const std::vector<std::string>& argv) {
    TerminalProgram program(argv);
    ASSERT_TRUE(program.started());
    const InputWait answer = await_state(program, State::Waiting);
    EXPECT_EQ(answer.state, State::Waiting) << state_name(answer.state) << ": " << answer.why
                                            << "\noutput: " << program.output();
    EXPECT_GT(answer.reader, 0);
    EXPECT_GT(answer.foreground, 0);
    EXPECT_NE(answer.why.find("terminal"), std::string::npos) << answer.why;
}

// The program prints "ready" when it reaches its loop; then every probe over ~200 ms is Busy.
void expect_busy(const std::vector<std::string>& argv) {
    TerminalProgram program(argv);
    ASSERT_TRUE(program.started());
    ASSERT_TRUE(program.await_output("ready")) << program.output();
    for (int i = 0; i < 10; ++i) {
        const InputWait answer = program.probe();
        EXPECT_EQ(answer.state, State::Busy) << "probe " << i << ": " << state_name(answer.state) << ": " << answer.why;
        EXPECT_EQ(answer.reader, 0);
        program.read_output(20ms);
    }
}

const std::string kPython = "python3";

TEST(InputProbe, IdentifiesThePeerOfAPtyMaster) {
    UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    ASSERT_TRUE(master);
    ASSERT_EQ(::unlockpt(master.get()), 0);
    const TerminalIdentity identity = identify_terminal(master.get());
    ASSERT_TRUE(identity.known);
    UniqueFd peer(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
    ASSERT_TRUE(peer);
    struct stat st{};
    ASSERT_EQ(::fstat(peer.get(), &st), 0);
    EXPECT_EQ(identity.dev, st.st_dev);
    EXPECT_EQ(identity.rdev, st.st_rdev);
}

TEST(InputProbe, AnFdThatIsNoPtyMasterIdentifiesNothing) {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    UniqueFd read_end(fds[0]), write_end(fds[1]);
    EXPECT_FALSE(identify_terminal(read_end.get()).known);
    EXPECT_FALSE(foreground_group(read_end.get()).has_value());
    const InputWait answer = probe_input_wait(read_end.get(), TerminalIdentity{});
    EXPECT_EQ(answer.state, State::Unknown) << answer.why;
}

TEST(InputProbe, ForegroundGroupIsTheSessionLeadersGroup) {
    TerminalProgram program({"sh", "-c", "echo ready; read x"});
    ASSERT_TRUE(program.started());
    ASSERT_TRUE(program.await_output("ready"));
    EXPECT_EQ(foreground_group(program.master()), program.pid());
}

// --- Waiting ---

TEST(InputProbe, BashReadBuiltinWaits) { expect_waiting({"bash", "--norc", "--noprofile", "-c", "read -p 'name? ' x"}); }

TEST(InputProbe, DashReadWaits) {
    TerminalProgram program({"sh", "-c", "read x"});
    ASSERT_TRUE(program.started());
    const InputWait answer = await_state(program, State::Waiting);
    EXPECT_EQ(answer.state, State::Waiting) << answer.why;
    EXPECT_EQ(answer.reader, program.pid());
    EXPECT_EQ(answer.foreground, program.pid());
}

TEST(InputProbe, InteractiveBashAtItsPromptWaits) { expect_waiting({"bash", "--norc", "--noprofile", "-i"}); }

TEST(InputProbe, PythonInputWaits) { expect_waiting({kPython, "-c", "input('x? ')"}); }

// getpass reads /dev/tty, not fd 0: the controlling terminal under another device number.
TEST(InputProbe, PythonGetpassOnDevTtyWaits) {
    TerminalProgram program({kPython, "-c", "import getpass; getpass.getpass('pw? ')"});
    ASSERT_TRUE(program.started());
    const InputWait answer = await_state(program, State::Waiting);
    EXPECT_EQ(answer.state, State::Waiting) << state_name(answer.state) << ": " << answer.why;
    EXPECT_EQ(answer.reader, program.pid());
    EXPECT_EQ(answer.why.find("read(0)"), std::string::npos) << answer.why;  // its own fd for /dev/tty
}

TEST(InputProbe, CatWaits) {
    TerminalProgram program({"cat"});
    ASSERT_TRUE(program.started());
    const InputWait answer = await_state(program, State::Waiting);
    EXPECT_EQ(answer.state, State::Waiting) << answer.why;
    EXPECT_EQ(answer.reader, program.pid());
    EXPECT_NE(answer.why.find("read(0) on the terminal"), std::string::npos) << answer.why;
}

TEST(InputProbe, HeadWaits) { expect_waiting({"head", "-n1"}); }

TEST(InputProbe, ViWaits) {
    const std::string vi = find_program({"vim.tiny", "vim", "vi", "nvi"});
    if (vi.empty()) GTEST_SKIP() << "SKIPPED, NOT TESTED: no vi on PATH";
    expect_waiting({vi, "-u", "NONE", "-i", "NONE", "-n"});
}

TEST(InputProbe, PythonSelectOnStdinWaits) {
    expect_waiting({kPython, "-c", "import select; select.select([0], [], [])"});
}

TEST(InputProbe, PythonPollOnStdinWaits) {
    expect_waiting({kPython, "-c",
                    "import os, select\n"
                    "r, w = os.pipe()\n"  // a second, quiet fd before the terminal in the set
                    "p = select.poll(); p.register(r, select.POLLIN); p.register(0, select.POLLIN); p.poll()"});
}

TEST(InputProbe, PythonEpollOnStdinWaits) {
    expect_waiting({kPython, "-c",
                    "import os, select\n"
                    "r, w = os.pipe()\n"
                    "e = select.epoll(); e.register(r, select.EPOLLIN); e.register(0, select.EPOLLIN); e.poll()"});
}

// Idle threads (futex) do not hide the main thread's read.
TEST(InputProbe, ThreadedProgramReadingInputWaits) {
    expect_waiting({kPython, "-c",
                    "import threading\n"
                    "ev = threading.Event()\n"
                    "for _ in range(3): threading.Thread(target=ev.wait, daemon=True).start()\n"
                    "input('x? ')"});
}

// node's REPL: one thread reads the terminal while another event loop (libuv's) waits in
// epoll on descriptors that are not the terminal.
TEST(InputProbe, AnotherEventLoopBesideTheTerminalReaderWaits) {
    expect_waiting({kPython, "-c",
                    "import os, select, threading\n"
                    "r, w = os.pipe()\n"
                    "def loop():\n"
                    "    e = select.epoll(); e.register(r, select.EPOLLIN); e.poll()\n"
                    "threading.Thread(target=loop, daemon=True).start()\n"
                    "input('x? ')"});
}

// `cat | cat`: the second cat waits on a pipe, that is on the first, which reads the terminal.
TEST(InputProbe, PipelineWhoseHeadReadsTheTerminalWaits) {
    TerminalProgram program({"sh", "-c", "cat | cat"});
    ASSERT_TRUE(program.started());
    const InputWait answer = await_state(program, State::Waiting);
    EXPECT_EQ(answer.state, State::Waiting) << answer.why;
    EXPECT_NE(answer.reader, program.pid());  // a cat, not the shell
}

// --- Busy ---

TEST(InputProbe, SleepIsBusy) { expect_busy({"sh", "-c", "echo ready; exec sleep 5"}); }

TEST(InputProbe, BusyLoopIsBusy) { expect_busy({"sh", "-c", "echo ready; while :; do :; done"}); }

TEST(InputProbe, PythonSleepIsBusy) {
    expect_busy({kPython, "-c", "import time; print('ready', flush=True); time.sleep(5)"});
}

TEST(InputProbe, PipelineOfSleepIntoCatIsBusy) { expect_busy({"sh", "-c", "echo ready; sleep 5 | cat"}); }

TEST(InputProbe, ParallelMakeIsBusy) {
    char directory[] = "/tmp/input_probe_make.XXXXXX";
    ASSERT_NE(::mkdtemp(directory), nullptr);
    const std::string makefile = std::string(directory) + "/Makefile";
    {
        std::ofstream out(makefile);
        out << "all: a b\na:\n\tsleep 5\nb:\n\tsleep 5\n";
    }
    expect_busy({"sh", "-c", "echo ready; exec make -s -j2 -f " + makefile});
    std::filesystem::remove_all(directory);
}

TEST(InputProbe, PollingASocketIsBusy) {
    expect_busy({kPython, "-c",
                 "import socket, select\n"
                 "a, b = socket.socketpair()\n"
                 "p = select.poll(); p.register(a, select.POLLIN)\n"
                 "print('ready', flush=True); p.poll(5000)"});
}

TEST(InputProbe, SelectingAPipeIsBusy) {
    expect_busy({kPython, "-c",
                 "import os, select\n"
                 "r, w = os.pipe()\n"
                 "print('ready', flush=True); select.select([r], [], [], 5)"});
}

// A read from a pipe alone is no wait for the terminal.
TEST(InputProbe, ReadingOnlyAPipeIsBusy) {
    expect_busy({kPython, "-c",
                 "import os\n"
                 "r, w = os.pipe()\n"
                 "print('ready', flush=True); os.read(r, 1)"});
}

// A terminal, but not the session's: another pty's slave.
TEST(InputProbe, ReadingAnotherTerminalIsBusy) {
    expect_busy({kPython, "-c",
                 "import os\n"
                 "master, slave = os.openpty()\n"
                 "print('ready', flush=True); os.read(slave, 1)"});
}

// --- The session's cgroup ---

// A fresh cgroup v2 directory under this process's own, removed at the end.
class TestCgroup {
public:
    TestCgroup() {
        const std::optional<std::string> mount = cgroup2_mount();
        const std::optional<std::string> own = own_cgroup();
        if (!mount || !own) return;
        std::string path = *mount + *own + "/input_probe_test.XXXXXX";
        if (::mkdtemp(path.data()) == nullptr) return;
        path_ = path;
        directory_.reset(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        procs_.reset(::open((path_ + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    }
    TestCgroup(const TestCgroup&) = delete;
    TestCgroup& operator=(const TestCgroup&) = delete;
    // Kills what is left in it and waits (event: cgroup.events changes) until it is empty: the
    // processes a killed shell left are reaped by init, later.
    ~TestCgroup() {
        if (path_.empty()) return;
        if (const UniqueFd kill(::open((path_ + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC)); kill)
            (void)!::write(kill.get(), "1", 1);
        const UniqueFd events(::open((path_ + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC));
        const auto deadline = Clock::now() + 10s;
        while (events && Clock::now() < deadline) {
            char text[256];
            const ssize_t n = ::pread(events.get(), text, sizeof text - 1, 0);
            if (n <= 0) break;
            text[n] = '\0';
            if (std::string_view(text).find("populated 0") != std::string_view::npos) break;
            pollfd entry{events.get(), POLLPRI, 0};
            ::poll(&entry, 1, 100);
        }
        ::rmdir(path_.c_str());
    }
    // Whether it is a cgroup this process may move children into.
    [[nodiscard]] bool usable() const { return directory_ && procs_; }
    [[nodiscard]] int directory() const { return directory_.get(); }
    [[nodiscard]] int procs() const { return procs_.get(); }

private:
    std::string path_;
    UniqueFd directory_;
    UniqueFd procs_;
};

TEST(InputProbe, ProgramInTheSessionCgroupIsFoundThere) {
    TestCgroup cgroup;
    if (!cgroup.usable()) GTEST_SKIP() << "SKIPPED, NOT TESTED: no cgroup v2 directory may be made here";
    {
        TerminalProgram program({"sh", "-c", "cat | cat"}, cgroup.procs());
        ASSERT_TRUE(program.started());
        const InputWait answer = await_state(program, State::Waiting, cgroup.directory());
        EXPECT_EQ(answer.state, State::Waiting) << state_name(answer.state) << ": " << answer.why;
    }
}

// Given the session's cgroup, the probe looks nowhere else: a program outside it is not found.
TEST(InputProbe, ProgramOutsideTheGivenCgroupIsNotFound) {
    TestCgroup cgroup;
    if (!cgroup.usable()) GTEST_SKIP() << "SKIPPED, NOT TESTED: no cgroup v2 directory may be made here";
    TerminalProgram program({"cat"});
    ASSERT_TRUE(program.started());
    ASSERT_EQ(await_state(program, State::Waiting).state, State::Waiting);  // found by the host scan
    const InputWait answer = program.probe(cgroup.directory());
    EXPECT_EQ(answer.state, State::Unknown) << state_name(answer.state) << ": " << answer.why;
}

// A directory that is no cgroup (no cgroup.procs) falls back to the host scan.
TEST(InputProbe, UnreadableCgroupFallsBackToTheHostScan) {
    TerminalProgram program({"cat"});
    ASSERT_TRUE(program.started());
    const UniqueFd not_a_cgroup(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(not_a_cgroup);
    const InputWait answer = await_state(program, State::Waiting, not_a_cgroup.get());
    EXPECT_EQ(answer.state, State::Waiting) << state_name(answer.state) << ": " << answer.why;
}

// --- Unknown ---

TEST(InputProbe, MoreTasksThanTheBoundIsUnknown) {
    TerminalProgram program({kPython, "-c",
                             "import threading\n"
                             "ev = threading.Event()\n"
                             "for _ in range(" + std::to_string(kMaxProbedTasks + 4) +
                                 "): threading.Thread(target=ev.wait, daemon=True).start()\n"
                                 "input('x? ')"});
    ASSERT_TRUE(program.started());
    ASSERT_TRUE(program.await_output("x? "));  // every thread has started
    const InputWait answer = program.probe();
    EXPECT_EQ(answer.state, State::Unknown) << state_name(answer.state) << ": " << answer.why;
}

// The foreground group's only process exited (and was reaped); the terminal still names it.
TEST(InputProbe, ExitedForegroundGroupIsUnknown) {
    TerminalProgram program({kPython, "-c",
                             "import os, signal\n"
                             "signal.signal(signal.SIGTTOU, signal.SIG_IGN)\n"
                             "go_r, go_w = os.pipe()\n"
                             "child = os.fork()\n"
                             "if child == 0:\n"
                             "    os.setpgid(0, 0); os.read(go_r, 1); os._exit(0)\n"
                             "try: os.setpgid(child, child)\n"  // either side may run first
                             "except OSError: pass\n"
                             "os.tcsetpgrp(0, child)\n"
                             "os.write(go_w, b'x')\n"
                             "os.waitpid(child, 0)\n"
                             "print('ready', flush=True)\n"
                             "r, w = os.pipe(); os.read(r, 1)"});
    ASSERT_TRUE(program.started());
    ASSERT_TRUE(program.await_output("ready")) << program.output();
    const std::optional<pid_t> group = foreground_group(program.master());
    ASSERT_TRUE(group.has_value());
    EXPECT_NE(*group, program.pid());
    const InputWait answer = program.probe();
    EXPECT_EQ(answer.state, State::Unknown) << state_name(answer.state) << ": " << answer.why;
    EXPECT_EQ(answer.foreground, *group);
}

// The session leader exited: the terminal has no foreground group left.
TEST(InputProbe, ExitedSessionIsUnknown) {
    TerminalProgram program({"true"});
    ASSERT_TRUE(program.started());
    program.reap();
    const InputWait answer = program.probe();
    EXPECT_EQ(answer.state, State::Unknown) << answer.why;
    EXPECT_FALSE(foreground_group(program.master()).has_value());
}

}  // namespace
}  // namespace ptyvisor::server
