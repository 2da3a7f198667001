// The screen (protocol version 3, docs/protocol.md section 10): SNAPSHOT compared with tmux's
// capture-pane for the same program, size and input; answers to terminal queries; the
// worker killed in a flood; a program printing fuzzed escape sequences.
//
// Each comparison runs the program twice: in a pane of a private tmux server, and in a
// detached ptyvisor session, with the same environment and the same keys, then waits (by
// polling with a deadline) until each shows what is expected, and compares the texts.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "protocol/screen_payloads.h"
#include "protocol/session_payloads.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;
using Lines = std::vector<std::string>;

constexpr Millis kReply{10000};
constexpr Millis kSettle{20000};
constexpr Millis kPoll{100};

const char* const kPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Runs `command` with /bin/sh, returns its standard output.
std::string shell(const std::string& command) {
    std::string out;
    if (FILE* p = ::popen(command.c_str(), "r")) {
        char buf[4096];
        while (const std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
        ::pclose(p);
    }
    return out;
}

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

Lines split_lines(const std::string& text) {
    Lines lines;
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// Both sides' texts without trailing empty rows (capture-pane and SNAPSHOT both keep them,
// but a row's emptiness is all they say).
Lines trimmed(Lines lines) {
    while (!lines.empty() && lines.back().empty()) lines.pop_back();
    return lines;
}

std::string joined(const Lines& lines) {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
}

bool contains(const Lines& lines, const std::string& needle) {
    return joined(lines).find(needle) != std::string::npos;
}

// Polls `sample` until `ready` holds of two equal samples 300 ms apart (the program has
// drawn and stopped), or the deadline passes. Returns the last sample.
Lines settle(const std::function<std::optional<Lines>()>& sample, const std::function<bool(const Lines&)>& ready,
             Millis timeout = kSettle) {
    const auto deadline = Clock::now() + timeout;
    Lines last;
    bool have_last = false;
    while (Clock::now() < deadline) {
        const auto now = sample();
        if (now && ready(*now)) {
            if (have_last && *now == last) return *now;
            last = *now;
            have_last = true;
            std::this_thread::sleep_for(Millis(300));
            continue;
        }
        have_last = false;
        if (now) last = *now;
        std::this_thread::sleep_for(kPoll);
    }
    ADD_FAILURE() << "the screen did not settle as expected; last:\n" << joined(last);
    return last;
}

// A private tmux server with one pane.
class Tmux {
  public:
    Tmux(const std::string& cwd, const std::vector<std::string>& env, const std::string& command, int cols, int rows)
        : socket_("ptyvisor-screen-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++)) {
        std::string env_args;
        for (const auto& e : env) env_args += " " + quote(e);
        shell("tmux -L " + socket_ + " -f /dev/null new-session -d -x " + std::to_string(cols) + " -y " +
              std::to_string(rows) + " -c " + quote(cwd) + " " + quote("exec env -i" + env_args + " " + command) +
              " && tmux -L " + socket_ + " set-option -g status off >/dev/null");
    }
    ~Tmux() { shell("tmux -L " + socket_ + " kill-server 2>/dev/null"); }
    Lines capture() const { return split_lines(shell("tmux -L " + socket_ + " capture-pane -p 2>/dev/null")); }
    void keys(const std::string& bytes) const {
        std::string hex;
        char b[4];
        for (unsigned char c : bytes) std::snprintf(b, sizeof b, "%02x ", c), hex += b;
        shell("tmux -L " + socket_ + " send-keys -H " + hex);
    }
    void resize(int cols, int rows) const {
        shell("tmux -L " + socket_ + " resize-window -x " + std::to_string(cols) + " -y " + std::to_string(rows));
    }

  private:
    static inline int counter_ = 0;
    std::string socket_;
};

class Screen : public EndToEnd {
  protected:
    void SetUp() override {
        EndToEnd::SetUp();
        if (shell("command -v tmux").empty()) GTEST_FAIL() << "tmux is not installed (scripts/install-deps.sh)";
        ASSERT_NE(start_daemon(daemon_config()), nullptr);
    }
    virtual DaemonConfig daemon_config() { return config(); }

    std::vector<std::string> env() const {
        return {kPath, "HOME=" + work_, "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TERM=xterm-256color", "PS1=$ "};
    }

    // Starts argv detached (no controller: the daemon's screen answers queries).
    std::string start_detached(const std::vector<std::string>& argv, int cols = 80, int rows = 24) {
        return EndToEnd::start_detached(argv, [&](protocol::StartRequest& request) {
            request.env = env();
            request.term = "xterm-256color";
            request.size = {static_cast<std::uint16_t>(rows), static_cast<std::uint16_t>(cols)};
        });
    }

    // SNAPSHOT; nullopt with `error` set on an ERROR.
    std::optional<protocol::ScreenReply> snapshot(const std::string& id, std::uint32_t scrollback = 0,
                                                  bool attributes = false, std::string* error = nullptr,
                                                  Millis timeout = kReply) {
        auto c = connect_as_account();
        if (!c) return std::nullopt;
        if (c->send_frame(FrameType::Snapshot, protocol::encode(protocol::SnapshotRequest{id, scrollback, attributes})) != 0)
            return std::nullopt;
        auto in = c->next(timeout, 1 << 20);
        if (in.kind != Incoming::Kind::Frame) {
            if (error) *error = in.describe();
            return std::nullopt;
        }
        if (in.frame.type == FrameType::Error) {
            if (error) *error = std::string(in.frame.text());
            return std::nullopt;
        }
        EXPECT_EQ(in.frame.type, FrameType::Screen);
        auto d = protocol::decode_screen(in.frame.text());
        EXPECT_TRUE(d) << d.error;
        return d ? d.value : std::nullopt;
    }

    std::function<std::optional<Lines>()> screen_of(const std::string& id) {
        return [this, id]() -> std::optional<Lines> {
            auto s = snapshot(id);
            if (!s) return std::nullopt;
            return s->lines;
        };
    }

    void send(const std::string& id, const std::string& bytes) {
        auto c = connect_as_account();
        ASSERT_TRUE(c);
        ASSERT_EQ(c->send_frame(FrameType::Send, std::string(id) + bytes), 0);
        auto in = c->next(kReply);
        ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
        ASSERT_EQ(in.frame.type, FrameType::Sent) << in.frame.text();
    }

    // The same program and keys in tmux and in a session; each step's keys are sent once
    // the screens show `wait_for` (and have stopped changing). Returns both final texts.
    struct Step {
        std::string keys;
        std::string wait_for;  // after the keys
    };
    std::pair<Lines, Lines> run_both(const std::string& command, const std::string& first_wait,
                                     const std::vector<Step>& steps, int cols = 80, int rows = 24) {
        Tmux tmux(work_, env(), command, cols, rows);
        const std::string id = start_detached({"/bin/sh", "-c", "exec " + command}, cols, rows);
        if (id.empty()) return {};
        const auto sample_tmux = [&]() -> std::optional<Lines> { return tmux.capture(); };
        const auto sample_session = screen_of(id);
        const auto showing = [](const std::string& needle) {
            return [needle](const Lines& l) { return contains(l, needle); };
        };
        settle(sample_tmux, showing(first_wait));
        settle(sample_session, showing(first_wait));
        for (const auto& step : steps) {
            tmux.keys(step.keys);
            send(id, step.keys);
            settle(sample_tmux, showing(step.wait_for));
            settle(sample_session, showing(step.wait_for));
        }
        return {trimmed(tmux.capture()), trimmed(sample_session().value_or(Lines{}))};
    }

    // The session's output so far (LIST's offset), or nullopt.
    std::optional<std::uint64_t> output_bytes(const std::string& id) {
        auto c = connect_as_account();
        if (!c || c->send_frame(FrameType::List, "") != 0) return std::nullopt;
        auto in = c->next(kReply, 1 << 20);
        if (in.kind != Incoming::Kind::Frame || in.frame.type != FrameType::Sessions) return std::nullopt;
        const auto sessions = protocol::decode_sessions(in.frame.text());
        if (!sessions) return std::nullopt;
        for (const auto& s : *sessions.value)
            if (s.id == id) return s.offset;
        return std::nullopt;
    }

    void write_file(const std::string& name, const std::string& text) {
        const std::string path = work_ + "/" + name;
        write_text_file(path, text);
        ::chmod(path.c_str(), 0644);
    }
};

// ---- Compared with tmux ------------------------------------------------------------------

TEST_F(Screen, BashWithALongLineThatWraps) {
    const std::string long_arg(150, 'w');
    const auto [tmux, ours] = run_both("bash --norc --noprofile -i", "$", {{"echo " + long_arg + " done\r", "done\n$"}});
    EXPECT_EQ(joined(tmux), joined(ours));
}

TEST_F(Screen, PythonRepl) {
    const auto [tmux, ours] =
        run_both("python3 -q", ">>>", {{"6*7\r", "42"}, {"print('x' * 100)\r", "xxxx\n>>>"}});
    EXPECT_EQ(joined(tmux), joined(ours));
}

TEST_F(Screen, VimInsertSplitAndStatusLine) {
    const auto [tmux, ours] = run_both("vim -u NONE -i NONE -N -n --noplugin", "~",
                                       {{":set laststatus=2 ruler\r", "0,0-1"},
                                        {"ihello screen\x1b", "hello screen"},
                                        {":split\r", "[No Name] [+]"}});
    EXPECT_EQ(joined(tmux), joined(ours));
    EXPECT_TRUE(contains(ours, "hello screen"));
}

TEST_F(Screen, LessOnALongFile) {
    std::string text;
    for (int i = 1; i <= 500; ++i) text += "line " + std::to_string(i) + " of a long file\n";
    write_file("long.txt", text);
    const auto [tmux, ours] = run_both("less long.txt", "line 23 of", {{" ", "line 46 of"}, {"G", "(END)"}});
    EXPECT_EQ(joined(tmux), joined(ours));
}

TEST_F(Screen, TopFrameHasTheSameLayout) {
    // top's numbers change from one frame to the next; what is compared is the layout: the
    // number of rows drawn, the summary rows' labels and the column header, which do not.
    const auto [tmux, ours] = run_both("top -d 100", "PID", {});
    ASSERT_GE(tmux.size(), 7u);
    ASSERT_GE(ours.size(), 7u);
    const auto label = [](const std::string& row) { return row.substr(0, row.find(':')); };
    for (std::size_t i = 1; i < 5; ++i) EXPECT_EQ(label(tmux[i]), label(ours[i])) << i;
    const auto header = [](const Lines& l) {
        for (const auto& row : l)
            if (row.find("PID") != std::string::npos) return row;
        return std::string();
    };
    EXPECT_EQ(header(tmux), header(ours));
    EXPECT_EQ(tmux[0].substr(0, 6), ours[0].substr(0, 6));
}

TEST_F(Screen, CursesAlternateScreenAndBack) {
    write_file("alt.py",
               "import curses\n"
               "def main(w):\n"
               "    w.addstr(5, 10, 'ON THE ALTERNATE SCREEN')\n"
               "    w.refresh()\n"
               "    w.getch()\n"
               "print('before curses')\n"
               "curses.wrapper(main)\n"
               "print('after curses')\n"
               "import time; time.sleep(60)\n");
    const auto [tmux_on, ours_on] = run_both("python3 alt.py", "ON THE ALTERNATE", {});
    EXPECT_EQ(joined(tmux_on), joined(ours_on));
    const auto [tmux, ours] = run_both("python3 alt.py", "ON THE ALTERNATE", {{"q", "after curses"}});
    EXPECT_EQ(joined(tmux), joined(ours));
    EXPECT_TRUE(contains(ours, "before curses"));
    EXPECT_FALSE(contains(ours, "ON THE ALTERNATE"));
}

TEST_F(Screen, WideCharactersAndCombiningMarks) {
    write_file("wide.txt",
               "\xe4\xb8\xad\xe6\x96\x87\xe3\x81\xa8\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e | end\n"  // 中文と日本語
               "e\xcc\x81t\xc3\xa9 cafe\xcc\x81 n\xcc\x83 | end\n"                              // combining marks
               "\xef\xbd\xb6\xef\xbe\x80\xef\xbd\xb6\xef\xbe\x85 half-width | end\n"
               + std::string(76, '-') + "\xe4\xb8\xad\xe6\x96\x87\xe4\xb8\xad | wraps\n");
    const auto [tmux, ours] = run_both("sh -c 'cat wide.txt; echo DONE; exec sleep 60'", "DONE", {});
    EXPECT_EQ(joined(tmux), joined(ours));
}

TEST_F(Screen, ResizeInTheMiddle) {
    Tmux tmux(work_, env(), "bash --norc --noprofile -i", 80, 24);
    const std::string id = start_detached({"bash", "--norc", "--noprofile", "-i"}, 80, 24);
    ASSERT_FALSE(id.empty());
    const auto ready = [](const std::string& n) { return [n](const Lines& l) { return contains(l, n); }; };
    const auto sample_tmux = [&]() -> std::optional<Lines> { return tmux.capture(); };
    settle(sample_tmux, ready("$"));
    settle(screen_of(id), ready("$"));
    const std::string first = "for i in $(seq 1 30); do echo before-$i; done\r";
    tmux.keys(first);
    send(id, first);
    settle(sample_tmux, ready("before-30\n$"));
    settle(screen_of(id), ready("before-30\n$"));
    // The resize: tmux resizes its window; the session's controller sends RESIZE.
    tmux.resize(60, 15);
    {
        auto c = connect_as_account();
        ASSERT_TRUE(c);
        protocol::AttachRequest attach{id, {protocol::LogPosition::Kind::Tail, 0}, false, false, false};
        ASSERT_EQ(c->send_frame(FrameType::Attach, protocol::encode(attach)), 0);
        auto in = c->next(kReply);
        ASSERT_EQ(in.frame.type, FrameType::Attached) << in.describe();
        ASSERT_EQ(c->send_frame(FrameType::Resize, protocol::encode(protocol::WindowSize{15, 60})), 0);
        ASSERT_EQ(c->send_frame(FrameType::Detach, ""), 0);
        for (;;) {
            auto next = c->next(kReply);
            if (next.kind != Incoming::Kind::Frame || next.frame.type == FrameType::Detached) break;
        }
    }
    const std::string second = "echo after-resize $COLUMNS x $LINES\r";
    tmux.keys(second);
    send(id, second);
    const auto tmux_lines = trimmed(settle(sample_tmux, ready("after-resize 60 x 15\n$")));
    const auto ours = trimmed(settle(screen_of(id), ready("after-resize 60 x 15\n$")));
    EXPECT_EQ(joined(tmux_lines), joined(ours));
    const auto s = snapshot(id);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->cols, 60);
    EXPECT_EQ(s->rows, 15);
}

// ---- What a snapshot holds ---------------------------------------------------------------

TEST_F(Screen, CursorTitleScrollbackAndAttributes) {
    write_file("show.sh",
               "for i in $(seq 1 40); do echo scrolled-$i; done\n"
               "printf '\\033]2;the title\\007\\033[1;31mRED\\033[0m plain'\n"
               "exec sleep 60\n");
    const std::string id = start_detached({"sh", "show.sh"}, 40, 10);
    ASSERT_FALSE(id.empty());
    settle(screen_of(id), [](const Lines& l) { return contains(l, "RED plain"); });
    const auto s = snapshot(id, 50, true);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->title, "the title");
    EXPECT_EQ(s->lines.back(), "RED plain");
    EXPECT_EQ(s->cursor_row, 9);
    EXPECT_EQ(s->cursor_col, 9);
    EXPECT_FALSE(s->alternate);
    ASSERT_EQ(s->scrollback.size(), 31u);  // 40 lines + 1 = 41 rows drawn, 10 shown
    EXPECT_EQ(s->scrollback.front(), "scrolled-1");
    EXPECT_EQ(s->scrollback.back(), "scrolled-31");
    ASSERT_TRUE(s->attributes);
    ASSERT_EQ(s->attributes->size(), 1u);
    EXPECT_TRUE((*s->attributes)[0].bold);
    EXPECT_EQ((*s->attributes)[0].width, 3);
    EXPECT_EQ((*s->attributes)[0].fg, (protocol::Colour{protocol::Colour::Kind::Indexed, 1}));
}

TEST_F(Screen, TheCliPrintsTheScreen) {
    const std::string id = start_detached({"sh", "-c", "echo from the cli; exec sleep 60"});
    ASSERT_FALSE(id.empty());
    settle(screen_of(id), [](const Lines& l) { return contains(l, "from the cli"); });
    auto cli = run_cli({"screen", id});
    ASSERT_TRUE(cli);
    const auto exit = cli->wait_exit(kReply);
    ASSERT_TRUE(exit);
    EXPECT_TRUE(exit->exited_with(0)) << exit->describe() << cli->err();
    EXPECT_EQ(cli->out().substr(0, 13), "from the cli\n");
    EXPECT_EQ(split_lines(cli->out()).size(), 24u);
    auto json = run_cli({"screen", "--json", id});
    ASSERT_TRUE(json);
    ASSERT_TRUE(json->wait_exit(kReply));
    EXPECT_TRUE(protocol::decode_screen(json->out()));
}

TEST_F(Screen, UnknownSessionAndBadRequests) {
    std::string error;
    EXPECT_FALSE(snapshot(std::string(32, 'a'), 0, false, &error));
    EXPECT_NE(error.find("no_such_session"), std::string::npos) << error;
    auto c = connect_as_account();
    ASSERT_TRUE(c);
    ASSERT_EQ(c->send_frame(FrameType::Snapshot, R"({"id":"x","scrollback":99999999})"), 0);
    auto in = c->next(kReply);
    ASSERT_EQ(in.kind, Incoming::Kind::Frame);
    EXPECT_EQ(in.frame.type, FrameType::Error);
    EXPECT_NE(std::string(in.frame.text()).find("bad_frame"), std::string::npos);
}

// ---- Answers to terminal queries ---------------------------------------------------------

// A program that sends a query and waits at most 3 s for the answer, then prints it (or
// TIMEOUT): without an answer it would wait forever, as vim or prompt_toolkit do.
const char* const kAsk =
    "import os, sys, select, termios, tty\n"
    "tty.setraw(0)\n"
    "q = sys.argv[1].encode().decode('unicode_escape').encode('latin-1')\n"
    "os.write(1, q)\n"
    "got = b''\n"
    "end = sys.argv[2].encode()\n"
    "while not got.endswith(end):\n"
    "    r, _, _ = select.select([0], [], [], 3)\n"
    "    if not r: break\n"
    "    got += os.read(0, 100)\n"
    "os.write(1, b'\\r\\nANSWER:' + (got.hex().encode() if got else b'TIMEOUT') + b':END\\r\\n')\n"
    "import time; time.sleep(60)\n";

class Queries : public Screen {
  protected:
    // The answer, hex-decoded; "TIMEOUT" if none came.
    std::string ask(const std::string& query, const std::string& last_byte) {
        write_file("ask.py", kAsk);
        const std::string id = start_detached({"python3", "ask.py", query, last_byte});
        if (id.empty()) return {};
        const auto lines = settle(screen_of(id), [](const Lines& l) { return contains(l, ":END"); });
        const std::string text = joined(lines);
        const auto at = text.find("ANSWER:");
        if (at == std::string::npos) return {};
        const std::string hex = text.substr(at + 7, text.find(":END") - at - 7);
        if (hex == "TIMEOUT") return hex;
        std::string bytes;
        for (std::size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
        return bytes;
    }
};

TEST_F(Queries, CursorPositionReport) { EXPECT_EQ(ask("\\x1b[3;5H\\x1b[6n", "R"), "\x1b[3;5R"); }
TEST_F(Queries, DeviceStatus) { EXPECT_EQ(ask("\\x1b[5n", "n"), "\x1b[0n"); }
TEST_F(Queries, PrimaryDeviceAttributes) { EXPECT_EQ(ask("\\x1b[c", "c"), "\x1b[?1;2c"); }
TEST_F(Queries, SecondaryDeviceAttributes) { EXPECT_EQ(ask("\\x1b[>c", "c"), "\x1b[>0;100;0c"); }
TEST_F(Queries, ForegroundColour) { EXPECT_EQ(ask("\\x1b]10;?\\x1b\\\\", "\\"), "\x1b]10;rgb:f0f0/f0f0/f0f0\x1b\\"); }
TEST_F(Queries, BackgroundColour) { EXPECT_EQ(ask("\\x1b]11;?\\x07", "\\"), "\x1b]11;rgb:0000/0000/0000\x1b\\"); }
TEST_F(Queries, PrivateModeReport) { EXPECT_EQ(ask("\\x1b[?25$p", "y"), "\x1b[?25;1$y"); }
// A flood's output reaches the screen worker in batches (screen_broker.h): a query at the end
// of a burst that is then followed by nothing is still answered, by the batch timer. The
// burst (6000 bytes and the query, one write) is read as a flood's.
TEST_F(Queries, AnsweredAtTheEndOfABurst) { EXPECT_EQ(ask(std::string(6000, 'x') + "\\x1b[c", "c"), "\x1b[?1;2c"); }

// With a controller that relays a real terminal, that terminal answers: the daemon does not.
TEST_F(Queries, NotAnsweredWhenTheControllerHasATerminal) {
    write_file("ask.py", kAsk);
    auto c = connect_as_account();
    ASSERT_TRUE(c);
    UniqueFd cwd = open_work_dir();
    auto request = RawClient::start_request({"python3", "ask.py", "\\x1b[6n", "R"}, env(), cwd.get());
    request.terminal = true;
    ASSERT_EQ(c->send_start(request, {cwd.get()}), 0);
    ASSERT_TRUE(c->expect_started(kReply));
    // The program gives up after 3 s of silence and says so.
    EXPECT_TRUE(c->read_output_until("ANSWER:TIMEOUT:END", Millis(15000))) << c->output();
}

// ---- Robustness --------------------------------------------------------------------------

pid_t worker_of(pid_t daemon) {
    const std::string task_dir = "/proc/" + std::to_string(daemon) + "/task";
    DIR* d = ::opendir(task_dir.c_str());
    if (!d) return 0;
    pid_t found = 0;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::istringstream children(read_text_file(task_dir + "/" + e->d_name + "/children"));
        for (pid_t child; children >> child;)
            if (read_text_file("/proc/" + std::to_string(child) + "/comm").starts_with("ptyvisor-screen")) found = child;
    }
    ::closedir(d);
    return found;
}

TEST_F(Screen, TheWorkerIsConfined) {
    // Once it has answered, it has confined itself: it reads nothing before.
    const std::string id = start_detached({"sh", "-c", "echo confined; exec sleep 60"});
    ASSERT_FALSE(id.empty());
    settle(screen_of(id), [](const Lines& l) { return contains(l, "confined"); });
    const pid_t worker = worker_of(daemon()->pid());
    ASSERT_GT(worker, 0);
    const std::string status = read_text_file("/proc/" + std::to_string(worker) + "/status");
    EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos);
    EXPECT_NE(status.find("Seccomp:\t2"), std::string::npos);
    EXPECT_NE(status.find("CapEff:\t0000000000000000"), std::string::npos);
    EXPECT_EQ(status.find("Uid:\t0\t"), std::string::npos);
    char root[256] = {};
    const ssize_t n = ::readlink(("/proc/" + std::to_string(worker) + "/root").c_str(), root, sizeof root - 1);
    ASSERT_GT(n, 0);
    EXPECT_NE(std::string(root), "/");
}

// Issue 24, item 11: as `nobody`, the worker could be stopped (kill -STOP) by any other
// `nobody` process, and with it every session's screen and query answers. It runs as a uid
// of its own now (server/screen_identity.h).
TEST_F(Screen, NoOtherAccountCanSignalTheWorker) {
    const std::string id = start_detached({"sh", "-c", "echo up; exec sleep 60"});
    ASSERT_FALSE(id.empty());
    settle(screen_of(id), [](const Lines& l) { return contains(l, "up"); });
    const pid_t worker = worker_of(daemon()->pid());
    ASSERT_GT(worker, 0);
    std::vector<Account> others{*account_};
    if (const auto nobody = lookup_account("nobody")) others.push_back(*nobody);
    for (const Account& other : others) {
        const pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            if (!drop_privileges(other.uid, other.gid, {})) ::_exit(3);
            if (::kill(worker, SIGSTOP) == 0) ::_exit(0);
            ::_exit(errno == EPERM ? 1 : 2);
        }
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        ASSERT_TRUE(WIFEXITED(status));
        EXPECT_EQ(WEXITSTATUS(status), 1) << "uid " << other.uid << ": 0 means it stopped the worker";
    }
    const std::string state = read_text_file("/proc/" + std::to_string(worker) + "/status");
    EXPECT_EQ(state.find("State:\tT"), std::string::npos) << "the worker is stopped";
    ::kill(worker, SIGCONT);  // should a signal have reached it
    EXPECT_TRUE(snapshot(id));
}

// Issue 24, item 9: a session wider than the emulator keeps (1001 columns): the worker's
// snapshot, at the 1000 columns it clamps to, was checked against 1001, and the worker that
// every session shares was killed for it, at every SNAPSHOT an observer cared to send.
TEST_F(Screen, ASnapshotOfASessionWiderThanTheEmulatorKeepsTheWorker) {
    const std::string id = start_detached({"sh", "-c", "echo wide; exec sleep 60"}, 1001, 30);
    ASSERT_FALSE(id.empty());
    settle(screen_of(id), [](const Lines& l) { return contains(l, "wide"); });
    const pid_t worker = worker_of(daemon()->pid());
    ASSERT_GT(worker, 0);
    for (int i = 0; i < 5; ++i) {
        std::string error;
        const auto s = snapshot(id, 0, false, &error);
        ASSERT_TRUE(s) << error;
        EXPECT_EQ(s->cols, protocol::kMaxScreenSide);
    }
    EXPECT_EQ(worker_of(daemon()->pid()), worker) << "the worker was restarted";
}

// Issue 24, item 9: a 1000x1000 screen of changing colours has more attributes than a SCREEN
// may carry (8 MiB); the worker's reply was refused, and the worker killed. The attributes
// are left out now, and the worker stays.
TEST_F(Screen, ASnapshotWhoseAttributesPassTheBoundKeepsTheWorker) {
    const std::string id = start_detached(
        {"python3", "-c",
         "import sys\n"
         "for r in range(1000):\n"
         "    sys.stdout.write(''.join('\\x1b[%dm%s' % (31 + (r + c) % 7, chr(97 + c % 26)) for c in range(1000)))\n"
         "sys.stdout.write('\\x1b[0m\\x1b[Hcolours')\n"
         "sys.stdout.flush()\n"
         "import time; time.sleep(60)\n"},
        1000, 1000);
    ASSERT_FALSE(id.empty());
    settle(screen_of(id), [](const Lines& l) { return contains(l, "colours"); }, Millis(120000));
    const pid_t worker = worker_of(daemon()->pid());
    ASSERT_GT(worker, 0);
    std::string error;
    // A million cells of attributes take the worker seconds to encode, ten times that under
    // ASan+UBSan: this reply may take longer than any other.
    const auto s = snapshot(id, 0, /*attributes=*/true, &error, Millis(120000));
    ASSERT_TRUE(s) << error;
    EXPECT_EQ(s->cols, 1000);
    EXPECT_TRUE(!s->attributes || s->attributes->empty()) << "attributes past the bound";
    EXPECT_EQ(worker_of(daemon()->pid()), worker) << "the worker was restarted";
}

TEST_F(Screen, KilledInAFloodLosesNothing) {
#if defined(__SANITIZE_ADDRESS__)
    const int count = 500000;  // ASan slows the emulator about tenfold: still twice the log
#else
    const int count = 2000000;  // ~17 MB of output, 8 times the log
#endif
    const std::string id = start_detached({"sh", "-c", "seq 1 " + std::to_string(count) + "; echo FLOOD-DONE; exec sleep 60"});
    ASSERT_FALSE(id.empty());
    const pid_t first = worker_of(daemon()->pid());
    ASSERT_GT(first, 0);
    // In the middle of the flood: once a megabyte is out.
    const auto deadline = Clock::now() + Millis(30000);
    while (output_bytes(id).value_or(0) < 1024 * 1024 && Clock::now() < deadline) std::this_thread::sleep_for(Millis(5));
    ASSERT_EQ(::kill(first, SIGKILL), 0);
    EXPECT_LT(output_bytes(id).value_or(0), 16u * 1024 * 1024) << "the flood was over before the worker was killed";
    // The session is unaffected: its output arrives whole (READ from the start of the log).
    const auto lines = settle(
        [&]() -> std::optional<Lines> {
            std::string error;
            auto s = snapshot(id, 0, false, &error);
            if (!s) return std::nullopt;  // the worker is restarting
            return s->lines;
        },
        [](const Lines& l) { return contains(l, "FLOOD-DONE"); }, Millis(60000));
    ASSERT_GE(lines.size(), 2u);
    EXPECT_TRUE(contains(lines, std::to_string(count) + "\nFLOOD-DONE"));
    const pid_t second = worker_of(daemon()->pid());
    EXPECT_GT(second, 0);
    EXPECT_NE(second, first);
    // Nothing lost: the log ends at every byte seq wrote (with \r\n from the terminal).
    std::size_t expected = 0;
    for (int i = 1; i <= count; ++i) expected += std::to_string(i).size() + 2;
    expected += std::string("FLOOD-DONE\r\n").size();
    EXPECT_EQ(output_bytes(id), expected);
}

// The attack: output that costs the emulator far longer than the reply timeout (each
// insert-line on a 1000x1000 screen moves a million cells). Left alone it would stop every
// session's screen, and again at each restart, since each restart replays the log. The
// worker is killed twice while on that session's output; then that session's screen is
// turned off, and the other sessions' screens come back.
class ScreenUnderCostlyOutput : public Screen {
  protected:
    DaemonConfig daemon_config() override {
        DaemonConfig c = config();
        c.screen_reply_timeout = 2;
        return c;
    }
};

TEST_F(ScreenUnderCostlyOutput, OnlyTheCostlySessionLosesItsScreen) {
    const std::string innocent = start_detached({"sh", "-c", "echo innocent-ready; exec sleep 120"});
    ASSERT_FALSE(innocent.empty());
    settle(screen_of(innocent), [](const Lines& l) { return contains(l, "innocent-ready"); });
    const pid_t first = worker_of(daemon()->pid());
    std::string costly_output;
    for (int i = 0; i < 20000; ++i) costly_output += "\x1b[L";
    write_file("costly.bin", costly_output);
    const std::string costly = start_detached({"sh", "-c", "cat costly.bin; exec sleep 120"}, 1000, 1000);
    ASSERT_FALSE(costly.empty());

    // Its SNAPSHOTs fail while the worker is stuck on it (killed, restarted, stuck again on
    // the replay), and then for good, saying why.
    std::string error;
    const auto deadline = Clock::now() + Millis(120000);
    while (Clock::now() < deadline) {
        error.clear();
        if (!snapshot(costly, 0, false, &error) && error.find("screen is off") != std::string::npos) break;
        std::this_thread::sleep_for(Millis(100));
    }
    EXPECT_NE(error.find("screen is off"), std::string::npos) << error;
    EXPECT_NE(worker_of(daemon()->pid()), first) << "the worker was never restarted";

    // The other session's screen is back, rebuilt from its log, and new output reaches it.
    send(innocent, "typed-later");  // echoed by the terminal
    const auto lines = settle(screen_of(innocent), [](const Lines& l) { return contains(l, "typed-later"); });
    ASSERT_GE(lines.size(), 2u);
    EXPECT_EQ(lines[0], "innocent-ready");
    EXPECT_EQ(lines[1], "typed-later");
}

TEST_F(Screen, FuzzedEscapeSequencesDoNotCrashTheWorker) {
    // Random bytes weighted towards escape sequences: CSI with random parameters, OSC, DCS,
    // C1 controls, broken UTF-8, huge counts and sizes.
    std::mt19937 rng(1234);
    std::string junk;
    const char* const pieces[] = {"\x1b[", "\x1b]", "\x1bP", "\x1b[?", "\x1b[>", ";", "99999999", "1049h", "\x9b",
                                  "\x90", "\x07", "\x1b\\", "\xff", "\xc3", "\xe4\xb8", "m", "H", "r", "J", "K",
                                  "L", "M", "@", "P", "X", "S", "T", "t", "q", "$p", "6n", "c", "\r\n"};
    for (int i = 0; i < 200000; ++i) {
        if (rng() % 3 == 0) junk += static_cast<char>(rng() % 256);
        else junk += pieces[rng() % std::size(pieces)];
    }
    write_file("junk.bin", junk);
    // No echo: the junk's queries are answered into the terminal's input, which nobody
    // reads; echoed, the answers would scroll SURVIVED away.
    const std::string id = start_detached(
        {"sh", "-c", "stty -echo; for i in 1 2 3 4 5; do cat junk.bin; done; printf '\\033c\\033[?1049l'; echo SURVIVED; exec sleep 60"});
    ASSERT_FALSE(id.empty());
    const pid_t worker = worker_of(daemon()->pid());
    const auto lines = settle(screen_of(id), [](const Lines& l) { return contains(l, "SURVIVED"); }, Millis(60000));
    EXPECT_TRUE(contains(lines, "SURVIVED"));
    EXPECT_EQ(worker_of(daemon()->pid()), worker) << "the worker was restarted";
}

// ---- A worker that falls behind -----------------------------------------------------------
//
// What the daemon has yet to send the worker waits in the daemon's memory. The worker runs at
// nice 10, and an agent can starve it of CPU, or simply outrun it. Stopping it (SIGSTOP) is
// the worst case, made certain: from then on it reads nothing.
class ScreenBehind : public Screen {
  protected:
    DaemonConfig daemon_config() override {
        DaemonConfig c = config();
        c.screen_reply_timeout = 120;  // the stopped worker owes nothing it could be killed for meanwhile
        c.admissions_per_minute = 1000000;
        return c;
    }

    // Starts a session, waits for its screen (the worker is up and has answered), and stops
    // the worker. Returns its pid, or 0 after recording a failure.
    pid_t stop_the_worker() {
        const std::string id = start_detached({"sh", "-c", "echo worker-up; exec sleep 120"});
        if (id.empty()) return 0;
        settle(screen_of(id), [](const Lines& l) { return contains(l, "worker-up"); });
        const pid_t worker = worker_of(daemon()->pid());
        EXPECT_GT(worker, 0);
        if (worker <= 0 || ::kill(worker, SIGSTOP) != 0) return 0;
        return worker;
    }
};

// The attack: RESIZE frames as fast as a socket takes them, while the worker is stopped. Kept
// one by one for the worker, they would grow the daemon without bound (about 90 bytes
// apiece); a Resize that follows another with no output between replaces it, so the daemon
// stays within a bound.
TEST_F(ScreenBehind, AResizeFloodDoesNotGrowTheDaemon) {
    const std::string id = start_detached({"sh", "-c", "echo resize-me; exec sleep 120"});
    ASSERT_FALSE(id.empty());
    settle(screen_of(id), [](const Lines& l) { return contains(l, "resize-me"); });
    const pid_t worker = stop_the_worker();
    ASSERT_GT(worker, 0);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->send_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, false, false})), 0);
    const auto attached = c->next(kReply);
    ASSERT_EQ(attached.kind, Incoming::Kind::Frame) << attached.describe();
    ASSERT_EQ(attached.frame.type, FrameType::Attached) << attached.frame.text();

    const std::size_t resizes = scaled(1000000, 400000, 3000000);  // ASan: 400,000 in about 21 s
    const std::size_t per_batch = 10000;
    const auto size_of = [](std::size_t i) {
        return protocol::WindowSize{static_cast<std::uint16_t>(24 + i % 2), static_cast<std::uint16_t>(80 + i % 7)};
    };
    std::vector<std::uint8_t> batch;
    for (std::size_t i = 0; i < per_batch; ++i) {
        const auto f = protocol::encode_frame(FrameType::Resize, protocol::encode(size_of(i)));
        batch.insert(batch.end(), f.begin(), f.end());
    }
    const long before_kib = daemon()->rss_kib();
    for (std::size_t sent = 0; sent < resizes; sent += per_batch) ASSERT_EQ(c->send(batch), 0) << "after " << sent;
    // DETACHED comes once the daemon has handled every frame before it.
    ASSERT_EQ(c->send_frame(FrameType::Detach, ""), 0);
    auto detached = c->next(Millis(120000));
    while (detached.kind == Incoming::Kind::Frame && detached.frame.type == FrameType::Output) detached = c->next(Millis(120000));
    ASSERT_EQ(detached.kind, Incoming::Kind::Frame) << detached.describe();
    ASSERT_EQ(detached.frame.type, FrameType::Detached) << detached.frame.text();
    const long grown_kib = daemon()->rss_kib() - before_kib;
    // Kept one by one, a million resizes would take some 90 MB. What remains is the allocator's
    // churn, which levels off: ASan's (its 16 MB quarantine, its shadow) at about 35 MB.
#if defined(__SANITIZE_ADDRESS__)
    const long bound_kib = 64 * 1024;
#else
    const long bound_kib = 32 * 1024;
#endif
    EXPECT_LT(grown_kib, bound_kib) << resizes << " resizes";

    // The worker, let go, catches up with the last size.
    ASSERT_EQ(::kill(worker, SIGCONT), 0);
    const auto last = size_of(per_batch - 1);
    std::optional<protocol::ScreenReply> shown;
    const auto deadline = Clock::now() + Millis(60000);
    while (Clock::now() < deadline) {
        shown = snapshot(id);
        if (shown && shown->cols == last.cols && shown->rows == last.rows) break;
        std::this_thread::sleep_for(Millis(50));
    }
    ASSERT_TRUE(shown);
    EXPECT_EQ(shown->cols, last.cols);
    EXPECT_EQ(shown->rows, last.rows);
    EXPECT_EQ(worker_of(daemon()->pid()), worker) << "coalesced resizes alone must not cost the worker its life";
}

// Sessions started in a burst while the worker reads nothing: each waits to hand the worker
// a copy of its log (a descriptor). The socket to the worker takes a few hundred, then they
// wait in the daemon. Past 256 of those (ScreenBroker::kMaxBacklogFds), the worker is too far
// behind to wait for: it is killed, and its successor rebuilds the screens of the sessions
// still there. Before, the copies piled up for as long as the worker lagged.
TEST_F(ScreenBehind, ABurstOfSessionsDoesNotPileUpLogsForAStoppedWorker) {
    const pid_t worker = stop_the_worker();
    ASSERT_GT(worker, 0);
    const long fds_before = daemon()->fd_count();
    long most = fds_before;
    for (int i = 0; i < 800; ++i) {
        auto c = connect_as_account();
        ASSERT_NE(c, nullptr);
        ASSERT_TRUE(start_session(*c, {"true"})) << "session " << i;
        std::string seen;
        ASSERT_TRUE(c->read_until_exit(Millis(20000), &seen)) << "session " << i << ": " << seen;
        most = std::max(most, daemon()->fd_count());
    }
    EXPECT_LT(most, fds_before + 256 + 32) << "descriptors held while the worker was stopped";
    EXPECT_NE(daemon()->log().find("killing the screen worker"), std::string::npos);

    // A new worker serves, and the stopped one is gone.
    const std::string id = start_detached({"sh", "-c", "echo after-the-burst; exec sleep 120"});
    ASSERT_FALSE(id.empty());
    settle(screen_of(id), [](const Lines& l) { return contains(l, "after-the-burst"); }, Millis(60000));
    const pid_t now = worker_of(daemon()->pid());
    EXPECT_GT(now, 0);
    EXPECT_NE(now, worker);
}

}  // namespace
}  // namespace ptyvisor::itest
