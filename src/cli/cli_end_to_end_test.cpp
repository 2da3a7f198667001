// The `ptyvisor` executable against a fake daemon written here: byte-exact output, exit
// statuses, ^D at end of input, STOP on SIGTERM, and the terminal restored on every path.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/linux.h"
#include "common/unique_fd.h"
#include "protocol/fd_passing.h"
#include "protocol/frame.h"
#include "protocol/frame_decoder.h"
#include "protocol/payloads.h"
#include "protocol/session_payloads.h"

extern char** environ;

namespace ptyvisor {
namespace {

using protocol::Frame;
using protocol::FrameType;

constexpr int kTimeoutMs = 20000;

// The daemon's side of one accepted connection.
struct Peer {
    UniqueFd fd;
    protocol::FrameDecoder decoder;
    std::vector<UniqueFd> fds;
    bool eof = false;

    // The next frame, or nullopt at end of stream or after the timeout (a test failure).
    std::optional<Frame> next() {
        std::vector<std::uint8_t> buffer(128 * 1024);
        Frame frame;
        for (;;) {
            const auto status = decoder.next(frame);
            if (status == protocol::FrameDecoder::Status::Ready) return frame;
            if (status == protocol::FrameDecoder::Status::Failed || eof) return std::nullopt;
            pollfd p{fd.get(), POLLIN, 0};
            if (::poll(&p, 1, kTimeoutMs) != 1) {
                ADD_FAILURE() << "the client sent nothing";
                return std::nullopt;
            }
            auto r = protocol::receive_with_fds(fd.get(), buffer);
            if (r.error == -EAGAIN) continue;
            if (r.eof || r.error != 0) eof = true;
            for (auto& f : r.fds) fds.push_back(std::move(f));
            decoder.feed(std::span<const std::uint8_t>(buffer.data(), r.bytes));
        }
    }

    // Reads INPUT frames until `want` bytes have arrived; returns what came.
    std::string input(std::size_t want) {
        std::string got;
        while (got.size() < want) {
            auto f = next();
            if (!f) break;
            EXPECT_EQ(f->type, FrameType::Input);
            got += f->text();
        }
        return got;
    }

    void send(FrameType type, std::string_view payload) {
        const auto bytes = protocol::encode_frame(type, payload);
        std::size_t sent = 0;
        while (sent < bytes.size()) {
            const ssize_t n = ::send(fd.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
            if (n < 0) {
                ADD_FAILURE() << "send: " << std::strerror(errno);
                return;
            }
            sent += static_cast<std::size_t>(n);
        }
    }

    void started() { send(FrameType::Started, protocol::encode(protocol::Started{"ptyvisor-test.service", 99, {}})); }

    void exit_code(int code) {
        protocol::ExitStatus s;
        s.kind = protocol::ExitStatus::Kind::Exited;
        s.code = code;
        send(FrameType::Exit, protocol::encode(s));
    }
};

class FakeDaemon {
public:
    FakeDaemon() {
        dir_ = std::filesystem::temp_directory_path() / ("ptyvisor-cli-test-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir_);
        path_ = (dir_ / "d.sock").string();
        std::filesystem::remove(path_);
        listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
        if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(listener_.get(), 4) != 0)
            std::abort();
    }
    ~FakeDaemon() { std::filesystem::remove_all(dir_); }

    [[nodiscard]] const std::string& path() const { return path_; }

    Peer accept() {
        pollfd p{listener_.get(), POLLIN, 0};
        if (::poll(&p, 1, kTimeoutMs) != 1) {
            ADD_FAILURE() << "the client did not connect";
            return {};
        }
        return Peer{UniqueFd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC)), {}, {}, false};
    }

private:
    std::filesystem::path dir_;
    std::string path_;
    UniqueFd listener_;
};

struct Pipe {
    UniqueFd read, write;
};
Pipe make_pipe() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) std::abort();
    return {UniqueFd(p[0]), UniqueFd(p[1])};
}

// A running `ptyvisor` with the given stdio.
struct Client {
    pid_t pid = -1;
    UniqueFd pidfd;

    static Client spawn(const std::vector<std::string>& args, int in, int out, int err,
                        const std::string& socket) {
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, in, 0);
        posix_spawn_file_actions_adddup2(&actions, out, 1);
        posix_spawn_file_actions_adddup2(&actions, err, 2);
        std::vector<std::string> all{PTYVISOR_CLI_PATH};
        all.insert(all.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& a : all) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> env_storage{"PTYVISOR_SOCKET=" + socket, "TERM=xterm-test", "PATH=/usr/bin:/bin"};
        std::vector<char*> envp;
        for (auto& e : env_storage) envp.push_back(e.data());
        envp.push_back(nullptr);
        Client c;
        if (::posix_spawn(&c.pid, all[0].c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) std::abort();
        posix_spawn_file_actions_destroy(&actions);
        c.pidfd.reset(pidfd_open(c.pid));
        return c;
    }

    // The exit status as a shell reports it; -1 after a timeout (the client is killed).
    int wait() {
        pollfd p{pidfd.get(), POLLIN, 0};
        if (::poll(&p, 1, kTimeoutMs) != 1) {
            ADD_FAILURE() << "the client did not exit";
            ::kill(pid, SIGKILL);
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        return WIFSIGNALED(status) ? 1000 + WTERMSIG(status) : -1;
    }
};

std::string read_all(int fd) {
    std::string out;
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return out;
        out.append(buffer, static_cast<std::size_t>(n));
    }
}

// Runs `ptyvisor run ARGS` with stdin from `in`, the fake daemon's script in a thread, and
// returns {status, stdout, stderr}.
struct Result {
    int status;
    std::string out, err;
};
Result run_client(FakeDaemon& daemon, const std::vector<std::string>& args, int in,
                  const std::function<void(Peer&, pid_t)>& script) {
    auto out = make_pipe();
    auto err = make_pipe();
    Client client = Client::spawn(args, in, out.write.get(), err.write.get(), daemon.path());
    out.write.reset();
    err.write.reset();
    std::thread server([&] {
        Peer peer = daemon.accept();
        if (peer.fd) script(peer, client.pid);
    });
    std::string err_text;
    std::thread err_reader([&] { err_text = read_all(err.read.get()); });
    std::string out_text = read_all(out.read.get());
    const int status = client.wait();
    server.join();
    err_reader.join();
    return {status, out_text, err_text};
}

protocol::StartRequest expect_start(Peer& peer) {
    auto f = peer.next();
    EXPECT_TRUE(f && f->type == FrameType::Start);
    if (!f) return {};
    EXPECT_EQ(peer.fds.size(), 1u);
    auto d = protocol::decode_start(f->text());
    EXPECT_TRUE(d) << d.error;
    return d ? *d.value : protocol::StartRequest{};
}

TEST(CliRun, PipedInputEndsWithControlDAndOutputIsByteExact) {
    FakeDaemon daemon;
    auto in = make_pipe();
    ASSERT_EQ(::write(in.write.get(), "hello\n", 6), 6);
    in.write.reset();
    const std::string output = std::string("line\r\n") + std::string(200000, 'q') + "\x01\xff";
    const auto r = run_client(daemon, {"run", "-e", "FOO=bar", "-C", "/", "--", "cat", "-v", "--x"}, in.read.get(),
                              [&](Peer& peer, pid_t) {
        const auto start = expect_start(peer);
        EXPECT_EQ(start.argv, (std::vector<std::string>{"cat", "-v", "--x"}));
        EXPECT_NE(std::find(start.env.begin(), start.env.end(), "FOO=bar"), start.env.end());
        EXPECT_NE(std::find(start.env.begin(), start.env.end(), "TERM=xterm-test"), start.env.end());
        EXPECT_EQ(start.term, "xterm-test");
        EXPECT_EQ(start.size, (protocol::WindowSize{.rows = 24, .cols = 80}));
        struct stat root {};
        EXPECT_EQ(::stat("/", &root), 0);
        EXPECT_EQ(start.cwd_ino, root.st_ino) << "-C / is the directory sent";
        EXPECT_EQ(start.cwd_dev, root.st_dev);
        peer.started();
        EXPECT_EQ(peer.input(7), "hello\n\x04");
        for (std::size_t i = 0; i < output.size(); i += protocol::kMaxIoPayloadSize)
            peer.send(FrameType::Output, std::string_view(output).substr(i, protocol::kMaxIoPayloadSize));
        peer.exit_code(7);
    });
    EXPECT_EQ(r.status, 7);
    EXPECT_EQ(r.out, output);
    EXPECT_EQ(r.err, "");
}

TEST(CliRun, PartialLineFromAFileGetsTwoControlDs) {
    FakeDaemon daemon;
    const auto file = std::filesystem::temp_directory_path() / ("ptyvisor-cli-in-" + std::to_string(::getpid()));
    {
        UniqueFd f(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        ASSERT_EQ(::write(f.get(), "abc", 3), 3);
    }
    UniqueFd in(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    std::filesystem::remove(file);
    const auto r = run_client(daemon, {"run", "--clean-env", "--term", "vt100", "--size", "100x30", "--", "cat"},
                              in.get(), [&](Peer& peer, pid_t) {
        const auto start = expect_start(peer);
        EXPECT_EQ(start.env, (std::vector<std::string>{"TERM=vt100"}));
        EXPECT_EQ(start.size, (protocol::WindowSize{.rows = 30, .cols = 100}));
        peer.started();
        EXPECT_EQ(peer.input(5), "abc\x04\x04");
        peer.exit_code(0);
    });
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.err, "");
}

TEST(CliRun, DevNullInputSendsOneControlD) {
    FakeDaemon daemon;
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const auto r = run_client(daemon, {"run", "true"}, in.get(), [&](Peer& peer, pid_t) {
        expect_start(peer);
        peer.started();
        EXPECT_EQ(peer.input(1), "\x04");
        protocol::ExitStatus s;
        s.kind = protocol::ExitStatus::Kind::Signaled;
        s.signal = 9;
        s.reason = protocol::ExitReason::ClientStalled;
        peer.send(FrameType::Exit, protocol::encode(s));
    });
    EXPECT_EQ(r.status, 137);
    EXPECT_EQ(r.err, "ptyvisor: session ended: client_stalled\n");
}

TEST(CliRun, ErrorExits255WithTheMessage) {
    FakeDaemon daemon;
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const auto r = run_client(daemon, {"run", "--quiet", "--", "ls"}, in.get(), [&](Peer& peer, pid_t) {
        expect_start(peer);
        peer.send(FrameType::Error,
                  protocol::encode(protocol::ErrorReply{protocol::ErrorCode::Busy, "all 16 session slots are in use"}));
    });
    EXPECT_EQ(r.status, 255);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "ptyvisor: all 16 session slots are in use (busy)\n");
}

TEST(CliRun, LostConnectionExits255) {
    FakeDaemon daemon;
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const auto r = run_client(daemon, {"run", "ls"}, in.get(), [&](Peer& peer, pid_t) {
        expect_start(peer);
        peer.started();
        peer.send(FrameType::Output, "partial");
    });
    EXPECT_EQ(r.status, 255);
    EXPECT_EQ(r.out, "partial");
    EXPECT_EQ(r.err, "ptyvisor: connection to the daemon lost\n");
}

TEST(CliRun, SigtermSendsStopAndWaitsForExit) {
    FakeDaemon daemon;
    auto in = make_pipe();  // stays open: only the signal ends the session
    const auto r = run_client(daemon, {"run", "sleep", "100"}, in.read.get(), [&](Peer& peer, pid_t pid) {
        expect_start(peer);  // sent after the client blocked its signals
        peer.started();
        ::kill(pid, SIGTERM);
        auto stop = peer.next();
        ASSERT_TRUE(stop);
        EXPECT_EQ(stop->type, FrameType::Stop);
        protocol::ExitStatus s;
        s.kind = protocol::ExitStatus::Kind::Signaled;
        s.signal = SIGTERM;
        s.reason = protocol::ExitReason::Stopped;
        peer.send(FrameType::Exit, protocol::encode(s));
    });
    EXPECT_EQ(r.status, 128 + SIGTERM);
    EXPECT_EQ(r.err, "ptyvisor: session ended: stopped\n");
}

TEST(CliRun, SigintIsForwardedToTheForegroundWhenStdinIsNotATerminal) {
    FakeDaemon daemon;
    auto in = make_pipe();
    const auto r = run_client(daemon, {"run", "sleep", "100"}, in.read.get(), [&](Peer& peer, pid_t pid) {
        expect_start(peer);
        peer.started();
        ::kill(pid, SIGINT);
        auto f = peer.next();
        ASSERT_TRUE(f);
        ASSERT_EQ(f->type, FrameType::Signal);
        const auto sig = protocol::decode_signal(f->text());
        ASSERT_TRUE(sig);
        EXPECT_EQ(sig.value->signal, SIGINT);
        EXPECT_EQ(sig.value->target, protocol::SignalTarget::Foreground);
        peer.exit_code(130);
    });
    EXPECT_EQ(r.status, 130);
}

// With a terminal on stdin: raw mode during the session (a byte arrives without a newline),
// SIGWINCH becomes RESIZE, and the terminal is restored afterwards.
struct Terminal {
    UniqueFd master, slave;
    termios before{};
    Terminal() {
        int m = -1, s = -1;
        winsize ws{};
        ws.ws_row = 33;
        ws.ws_col = 111;
        if (::openpty(&m, &s, nullptr, nullptr, &ws) != 0) std::abort();
        master.reset(m);
        slave.reset(s);
        ::fcntl(m, F_SETFD, FD_CLOEXEC);
        ::fcntl(s, F_SETFD, FD_CLOEXEC);
        ::tcgetattr(s, &before);
    }
    [[nodiscard]] bool canonical() const {
        termios t{};
        ::tcgetattr(slave.get(), &t);
        return (t.c_lflag & ICANON) != 0;
    }
    [[nodiscard]] bool restored() const {
        termios t{};
        ::tcgetattr(slave.get(), &t);
        return t.c_lflag == before.c_lflag && t.c_iflag == before.c_iflag && t.c_oflag == before.c_oflag &&
               t.c_cflag == before.c_cflag;
    }
};

TEST(CliRun, TerminalIsRawDuringTheSessionAndRestoredAfter) {
    FakeDaemon daemon;
    Terminal tty;
    const auto r = run_client(daemon, {"run", "vi"}, tty.slave.get(), [&](Peer& peer, pid_t pid) {
        const auto start = expect_start(peer);
        EXPECT_EQ(start.size, (protocol::WindowSize{.rows = 33, .cols = 111}));
        peer.started();
        ASSERT_EQ(::write(tty.master.get(), "x\x03", 2), 2);
        EXPECT_EQ(peer.input(2), "x\x03") << "raw mode passes bytes at once, ^C included";
        EXPECT_FALSE(tty.canonical());
        winsize ws{};
        ws.ws_row = 50;
        ws.ws_col = 160;
        ASSERT_EQ(::ioctl(tty.master.get(), TIOCSWINSZ, &ws), 0);
        ::kill(pid, SIGWINCH);
        auto f = peer.next();
        ASSERT_TRUE(f);
        ASSERT_EQ(f->type, FrameType::Resize);
        const auto size = protocol::decode_resize(f->text());
        ASSERT_TRUE(size);
        EXPECT_EQ(*size.value, (protocol::WindowSize{.rows = 50, .cols = 160}));
        peer.exit_code(3);
    });
    EXPECT_EQ(r.status, 3);
    EXPECT_TRUE(tty.restored());
}

TEST(CliRun, TerminalIsRestoredWhenAnUnresponsiveSessionIsAbandoned) {
    FakeDaemon daemon;
    Terminal tty;
    const auto r = run_client(daemon, {"run", "vi"}, tty.slave.get(), [&](Peer& peer, pid_t pid) {
        expect_start(peer);
        peer.started();
        ASSERT_EQ(::write(tty.master.get(), "y", 1), 1);
        EXPECT_EQ(peer.input(1), "y");
        EXPECT_FALSE(tty.canonical());
        ::kill(pid, SIGHUP);
        auto stop = peer.next();
        ASSERT_TRUE(stop);
        EXPECT_EQ(stop->type, FrameType::Stop);
        ::kill(pid, SIGTERM);  // the daemon does not answer; the client gives up
        EXPECT_FALSE(peer.next().has_value());
    });
    EXPECT_EQ(r.status, 128 + SIGTERM);
    EXPECT_EQ(r.err, "ptyvisor: stopped waiting for the session to end\n");
    EXPECT_TRUE(tty.restored());
}

TEST(CliRun, CannotConnectExits255) {
    auto out = make_pipe();
    auto err = make_pipe();
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    Client c = Client::spawn({"run", "--socket", "/nonexistent/x.sock", "--", "ls"}, in.get(), out.write.get(),
                             err.write.get(), "/unused");
    out.write.reset();
    err.write.reset();
    EXPECT_EQ(read_all(err.read.get()), "ptyvisor: cannot connect to /nonexistent/x.sock: No such file or directory\n");
    EXPECT_EQ(c.wait(), 255);
}

TEST(CliStatus, PrintsJsonOrATable) {
    FakeDaemon daemon;
    // As the daemon sends it, with a member from a newer daemon that --json keeps.
    const std::string report =
        R"({"backend":"direct","counters":{"accepted":1,"evicted":0,"handshake_timeouts":0,"rate_limited":0,)"
        R"("rejected":{}},"future":1,"sessions":[{"argv0":"bash","bytes_in":0,"bytes_out":0,"peer_pid":4,)"
        R"("pid":5,"started_at":0,"unit":"u.service"}],"version":"0.1.0"})";
    for (const bool json : {true, false}) {
        auto out = make_pipe();
        auto err = make_pipe();
        UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        std::vector<std::string> args{"status"};
        if (json) args.push_back("--json");
        Client c = Client::spawn(args, in.get(), out.write.get(), err.write.get(), daemon.path());
        out.write.reset();
        err.write.reset();
        std::thread server([&] {
            Peer peer = daemon.accept();
            auto f = peer.next();
            ASSERT_TRUE(f);
            EXPECT_EQ(f->type, FrameType::StatusRequest);
            EXPECT_TRUE(peer.fds.empty());
            peer.send(FrameType::Status, report);
        });
        const std::string text = read_all(out.read.get());
        EXPECT_EQ(c.wait(), 0);
        server.join();
        if (json) {
            EXPECT_EQ(text, report + "\n");
        } else {
            EXPECT_NE(text.find("u.service  5"), std::string::npos) << text;
            EXPECT_NE(text.find("  accepted            1\n"), std::string::npos) << text;
            EXPECT_EQ(text.find("future"), std::string::npos) << text;
        }
        EXPECT_EQ(read_all(err.read.get()), "");
    }
}

// A report that is not what docs/protocol.md 5.7 says is refused, table or --json alike.
TEST(CliStatus, RefusesAMalformedReport) {
    FakeDaemon daemon;
    for (const bool json : {true, false}) {
        auto out = make_pipe();
        auto err = make_pipe();
        UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        std::vector<std::string> args{"status"};
        if (json) args.push_back("--json");
        Client c = Client::spawn(args, in.get(), out.write.get(), err.write.get(), daemon.path());
        out.write.reset();
        err.write.reset();
        std::thread server([&] {
            Peer peer = daemon.accept();
            ASSERT_TRUE(peer.next());
            peer.send(FrameType::Status, R"({"sessions":[],"counters":{"accepted":1}})");
        });
        EXPECT_EQ(read_all(out.read.get()), "");
        EXPECT_EQ(c.wait(), 255);
        server.join();
        EXPECT_EQ(read_all(err.read.get()),
                  "ptyvisor: protocol error from the daemon: bad STATUS payload: 'version' is missing\n");
    }
}

TEST(CliHelp, EverySubcommandHasHelpAndTakesASocket) {
    for (const char* sub : {"run", "status", "ls", "attach", "logs", "send", "wait", "kill"}) {
        auto out = make_pipe();
        auto err = make_pipe();
        UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        Client c = Client::spawn({sub, "--help"}, in.get(), out.write.get(), err.write.get(), "/unused");
        out.write.reset();
        err.write.reset();
        const std::string text = read_all(out.read.get());
        EXPECT_EQ(c.wait(), 0) << sub;
        EXPECT_NE(text.find("--socket"), std::string::npos) << sub << ": " << text;
        EXPECT_EQ(read_all(err.read.get()), "") << sub;
    }
}

const std::string kId = "0123456789abcdef0123456789abcdef";

TEST(CliRunDetach, StartsDetachedAndPrintsTheIdAlone) {
    FakeDaemon daemon;
    auto in = make_pipe();  // never read: a detached run takes no input
    const auto r = run_client(daemon, {"run", "--detach", "--", "npm", "run", "dev"}, in.read.get(),
                              [&](Peer& peer, pid_t) {
        const auto start = expect_start(peer);
        EXPECT_EQ(start.argv, (std::vector<std::string>{"npm", "run", "dev"}));
        EXPECT_TRUE(start.detach);
        peer.send(FrameType::Started, protocol::encode(protocol::Started{"ptyvisor-" + kId + ".service", 99, kId}));
        EXPECT_FALSE(peer.next().has_value()) << "nothing after START: the client closes";
    });
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, kId + "\n");
    EXPECT_EQ(r.err, "");
}

TEST(CliRunDetach, AnErrorIs255WithTheReason) {
    FakeDaemon daemon;
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const auto r = run_client(daemon, {"run", "-d", "--", "nope"}, in.get(), [&](Peer& peer, pid_t) {
        expect_start(peer);
        peer.send(FrameType::Error, protocol::encode(protocol::ErrorReply{protocol::ErrorCode::StartFailed,
                                                                          "nope: command not found"}));
    });
    EXPECT_EQ(r.status, 255);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "ptyvisor: nope: command not found (start_failed)\n");
}

protocol::AttachRequest expect_attach(Peer& peer) {
    auto f = peer.next();
    EXPECT_TRUE(f && f->type == FrameType::Attach);
    if (!f || f->type != FrameType::Attach) return {};
    EXPECT_TRUE(peer.fds.empty());
    auto d = protocol::decode_attach(f->text());
    EXPECT_TRUE(d) << d.error;
    return d ? *d.value : protocol::AttachRequest{};
}

void attached(Peer& peer, bool observe, std::uint64_t offset) {
    protocol::AttachedReply a;
    a.id = kId;
    a.unit = "ptyvisor-" + kId + ".service";
    a.pid = 99;
    a.observe = observe;
    a.start = offset;
    a.end = offset;
    a.offset = offset;
    peer.send(FrameType::Attached, protocol::encode(a));
}

TEST(CliAttach, ReplaysFromTheStartForwardsInputAndTheDetachKeysDetach) {
    FakeDaemon daemon;
    auto in = make_pipe();
    const auto r = run_client(daemon, {"attach", kId}, in.read.get(), [&](Peer& peer, pid_t) {
        const auto a = expect_attach(peer);
        EXPECT_EQ(a.id, kId);
        EXPECT_EQ(a.from, (protocol::LogPosition{protocol::LogPosition::Kind::Start, 0}));
        EXPECT_FALSE(a.observe);
        EXPECT_FALSE(a.takeover);
        attached(peer, false, 0);
        peer.send(FrameType::Output, "the screen so far");
        const std::string typed = std::string("ls\x10x\x10\x11") + "never sent";
        ASSERT_EQ(::write(in.write.get(), typed.data(), typed.size()), static_cast<ssize_t>(typed.size()));
        EXPECT_EQ(peer.input(4), "ls\x10x") << "a ^P that does not begin the sequence is passed on";
        auto f = peer.next();
        ASSERT_TRUE(f);
        EXPECT_EQ(f->type, FrameType::Detach) << "then DETACH, and nothing of the keys";
        peer.send(FrameType::Detached, protocol::encode(protocol::DetachedReply{17, "detached"}));
    });
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, "the screen so far");
    EXPECT_EQ(r.err, "");
}

TEST(CliAttach, AnObserverSendsNoInput) {
    FakeDaemon daemon;
    auto in = make_pipe();
    const auto r = run_client(daemon, {"attach", "--observe", "--from", "5", kId}, in.read.get(),
                              [&](Peer& peer, pid_t) {
        const auto a = expect_attach(peer);
        EXPECT_TRUE(a.observe);
        EXPECT_EQ(a.from, (protocol::LogPosition{protocol::LogPosition::Kind::Offset, 5}));
        attached(peer, true, 5);
        peer.send(FrameType::Output, "out");
        // One read: what the observer typed, then the detach keys.
        ASSERT_EQ(::write(in.write.get(), "typed\n\x10\x11", 8), 8);
        auto f = peer.next();
        ASSERT_TRUE(f);
        EXPECT_EQ(f->type, FrameType::Detach) << "no INPUT from an observer";
        peer.send(FrameType::Detached, protocol::encode(protocol::DetachedReply{8, "detached"}));
    });
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, "out");
}

TEST(CliAttach, SigtermDetachesInsteadOfStopping) {
    for (const bool observe : {false, true}) {
        FakeDaemon daemon;
        auto in = make_pipe();
        std::vector<std::string> args{"attach", kId};
        if (observe) args.insert(args.begin() + 1, "--observe");
        const auto r = run_client(daemon, args, in.read.get(), [&](Peer& peer, pid_t pid) {
            expect_attach(peer);
            attached(peer, observe, 0);
            ::kill(pid, SIGTERM);
            auto f = peer.next();
            ASSERT_TRUE(f);
            EXPECT_EQ(f->type, FrameType::Detach) << "the session goes on without us";
            peer.send(FrameType::Detached, protocol::encode(protocol::DetachedReply{0, "detached"}));
        });
        EXPECT_EQ(r.status, 0) << observe;
        EXPECT_EQ(r.err, "") << observe;
    }
}

TEST(CliAttach, TheSessionsEndIsOurStatusAndATakeoverIsSaid) {
    FakeDaemon daemon;
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    auto r = run_client(daemon, {"attach", "--takeover", "--from", "tail", kId}, in.get(), [&](Peer& peer, pid_t) {
        const auto a = expect_attach(peer);
        EXPECT_TRUE(a.takeover);
        EXPECT_EQ(a.from.kind, protocol::LogPosition::Kind::Tail);
        attached(peer, false, 0);
        peer.exit_code(42);
    });
    EXPECT_EQ(r.status, 42);
    EXPECT_EQ(r.err, "");
    r = run_client(daemon, {"attach", kId}, in.get(), [&](Peer& peer, pid_t) {
        expect_attach(peer);
        attached(peer, false, 0);
        peer.send(FrameType::Detached, protocol::encode(protocol::DetachedReply{0, "taken_over"}));
    });
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.err, "ptyvisor: the session was taken over (by another client, or by a person who supervises it); it goes on\n");
}

TEST(CliAttach, BadOptionsAre255BeforeAnyConnection) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"attach", "--detach-keys", "ctrl-1", kId}, {"attach", "--from", "middle", kId},
          {"attach", "ABC"}, {"attach", "--observe", "--takeover", kId}}) {
        auto out = make_pipe();
        auto err = make_pipe();
        UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        Client c = Client::spawn(args, in.get(), out.write.get(), err.write.get(), "/nonexistent/never.sock");
        out.write.reset();
        err.write.reset();
        const std::string text = read_all(err.read.get());
        EXPECT_EQ(c.wait(), 255) << args[1];
        EXPECT_EQ(text.find("cannot connect"), std::string::npos) << text;
        EXPECT_FALSE(text.empty());
    }
}

TEST(CliLogs, FollowSaysWhatWasDroppedAndEndsWithZero) {
    FakeDaemon daemon;
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const auto r = run_client(daemon, {"logs", "--follow", kId}, in.get(), [&](Peer& peer, pid_t) {
        const auto a = expect_attach(peer);
        EXPECT_TRUE(a.observe);
        EXPECT_EQ(a.from.kind, protocol::LogPosition::Kind::Start);
        attached(peer, true, 100);
        peer.send(FrameType::Output, "abc");
        peer.send(FrameType::Dropped, protocol::encode(protocol::DroppedNotice{200, 97}));
        peer.send(FrameType::Output, "def");
        peer.exit_code(3);
    });
    EXPECT_EQ(r.status, 0) << "following ends with 0, whatever the session's status";
    EXPECT_EQ(r.out, "abcdef");
    EXPECT_EQ(r.err,
              "ptyvisor: output before offset 100 was dropped; showing from 100\n"
              "ptyvisor: 97 bytes of output were dropped (this client fell behind); continuing from offset 200\n");
}

}  // namespace
}  // namespace ptyvisor

namespace ptyvisor {
namespace {

TEST(CliRun, ClosedStdinIsEmptyInput) {
    FakeDaemon daemon;
    auto out = make_pipe();
    auto err = make_pipe();
    // Started with fd 0 closed: the socket must not become "stdin".
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addclose(&actions, 0);
    posix_spawn_file_actions_adddup2(&actions, out.write.get(), 1);
    posix_spawn_file_actions_adddup2(&actions, err.write.get(), 2);
    std::string path = PTYVISOR_CLI_PATH, run = "run", cmd = "cat";
    char* argv[] = {path.data(), run.data(), cmd.data(), nullptr};
    std::string socket_env = "PTYVISOR_SOCKET=" + daemon.path();
    char* envp[] = {socket_env.data(), nullptr};
    Client c;
    ASSERT_EQ(::posix_spawn(&c.pid, path.c_str(), &actions, nullptr, argv, envp), 0);
    posix_spawn_file_actions_destroy(&actions);
    c.pidfd.reset(pidfd_open(c.pid));
    out.write.reset();
    err.write.reset();
    std::thread server([&] {
        Peer peer = daemon.accept();
        expect_start(peer);
        peer.started();
        EXPECT_EQ(peer.input(1), "\x04");
        peer.exit_code(0);
    });
    EXPECT_EQ(read_all(out.read.get()), "");
    EXPECT_EQ(c.wait(), 0);
    server.join();
    EXPECT_EQ(read_all(err.read.get()), "");
}

}  // namespace
}  // namespace ptyvisor
