// Work and memory that a client chooses, each bounded by what that client may have (issue 24;
// docs/security.md, "The rule: a bound tied to the client"). Each test mounts one attack
// from the round 2 surfaces, as the agent's account or an observer could, and fails on a
// daemon without the bound.
//
// "The loop is not frozen" is checked by an event, not a clock: while the attack runs, a
// second client starts a session and sees it exit. A frozen loop answers it only once the
// attack lets go, which these tests make far longer than kAnswer.
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include "protocol/payloads.h"
#include "support/sessions_fixture.h"

namespace ptyvisor::itest {
namespace {

namespace fs = std::filesystem;
using protocol::FrameType;

constexpr Millis kAnswer{10000};  // any answer a working daemon gives; far below each attack

// A process the kernel cannot kill until the test lets it: frozen by the cgroup v1 freezer,
// a SIGKILLed process stays (state D) until it is thawed, as one blocked in a FUSE request
// that is never answered stays until the request is. The freezer hierarchy is the host's
// (/sys/fs/cgroup/freezer), or mounted here where the host's is hidden (the systemd
// harness's namespaces).
class Unkillable {
public:
    Unkillable(pid_t pid, const std::string& scratch) {
        std::string root = "/sys/fs/cgroup/freezer";
        if (!fs::exists(root + "/freezer.state") && !fs::exists(root + "/tasks")) {
            root = scratch + "/freezer";
            fs::create_directories(root);
            if (::mount("ptyvisor-freezer", root.c_str(), "cgroup", 0, "freezer") != 0) {
                error_ = std::string("cannot mount the cgroup v1 freezer: ") + std::strerror(errno);
                return;
            }
            mounted_ = root;
        }
        dir_ = root + "/ptyvisor-test-" + std::to_string(::getpid()) + "-" + std::to_string(pid);
        fs::create_directories(dir_);
        write_text_file(dir_ + "/cgroup.procs", std::to_string(pid));
        // FREEZING until every task has stopped; the state changes with no event to wait for,
        // so it is read again (cgroup-v1/freezer-subsystem.rst: write FROZEN again to retry).
        const auto deadline = Clock::now() + Millis(10000);
        for (;;) {
            write_text_file(dir_ + "/freezer.state", "FROZEN");
            frozen_ = read_text_file(dir_ + "/freezer.state").starts_with("FROZEN");
            if (frozen_ || Clock::now() > deadline) break;
            std::this_thread::sleep_for(Millis(10));
        }
        if (!frozen_) error_ = "the freezer did not freeze pid " + std::to_string(pid) + " in 10 s";
    }
    ~Unkillable() { release(); }
    Unkillable(const Unkillable&) = delete;
    Unkillable& operator=(const Unkillable&) = delete;

    [[nodiscard]] bool frozen() const { return frozen_; }
    [[nodiscard]] const std::string& error() const { return error_; }
    // Thaws it: a kill sent meanwhile now takes effect.
    void release() {
        if (!dir_.empty()) {
            write_text_file(dir_ + "/freezer.state", "THAWED");
            for (int i = 0; i < 100 && ::rmdir(dir_.c_str()) != 0; ++i) std::this_thread::sleep_for(Millis(50));
            dir_.clear();
        }
        if (!mounted_.empty()) ::umount2(mounted_.c_str(), MNT_DETACH);
        mounted_.clear();
    }

private:
    std::string dir_, mounted_, error_;
    bool frozen_ = false;
};

class ClientBound : public Sessions {
protected:
    // Another client is served meanwhile: a session of `true` starts and exits.
    void expect_the_loop_serves_others(const std::string& during) {
        auto other = connect_as_account();
        ASSERT_NE(other, nullptr);
        ASSERT_TRUE(start_session(*other, {"true"})) << "no STARTED during " << during;
        std::string seen;
        const auto exit = other->read_until_exit(kAnswer, &seen);
        ASSERT_TRUE(exit) << "no EXIT during " << during << ": " << seen;
        EXPECT_EQ(exit->code, 0);
    }

    // WAIT for `pattern` in the whole log of session `id`.
    static protocol::WaitRequest text_wait(const std::string& id, const std::string& pattern, std::uint64_t timeout_ms) {
        protocol::WaitRequest w;
        w.id = id;
        w.what = protocol::WaitRequest::For::Text;
        w.pattern = pattern;
        w.from = {protocol::LogPosition::Kind::Start, 0};
        w.timeout_ms = timeout_ms;
        return w;
    }

    // Sums the sizes of the *.cast files in `dir`.
    static std::uintmax_t cast_bytes(const std::string& dir) {
        std::uintmax_t total = 0;
        for (const auto& e : fs::directory_iterator(dir))
            if (e.path().extension() == ".cast") total += e.file_size();
        return total;
    }
};

// Item 1: accept4() ran out of descriptors while the refused sockets of a flood waited for
// the worker to close them; accepting was turned off, and only a connection's close turned
// it back on. None closed (the flood's admitted connections hold their handshakes), so the
// daemon never accepted again.
TEST_F(ClientBound, AcceptingResumesOnceAFloodOfRefusedConnectionsHasEnded) {
    DaemonConfig cfg = config();
    cfg.handshake = 600;  // the flood's admitted connections never time out here
    cfg.max_unauthenticated_per_peer = 4;
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    const long idle = d->idle_fd_count();
    ASSERT_GT(idle, 0);
    // Room for the four admitted handshakes (socket and pidfd each) and a few refusals: an
    // accept batch of refusals runs out of descriptors.
    const rlimit tight{static_cast<rlim_t>(idle + 24), static_cast<rlim_t>(idle + 24)};
    ASSERT_EQ(::prlimit(d->pid(), RLIMIT_NOFILE, &tight, nullptr), 0) << std::strerror(errno);
    // The flood waits in the listen queue while the daemon is stopped, and comes at once.
    ASSERT_EQ(::kill(d->pid(), SIGSTOP), 0);
    std::vector<std::unique_ptr<RawClient>> flood;
    // From a process of the account's own: the handshakes it holds are its own, and the
    // test's other clients (connect_as_account) are another process.
    for (int i = 0; i < 300; ++i) {
        auto c = connect_as(account_->uid, account_->gid, {});
        ASSERT_NE(c, nullptr);
        flood.push_back(std::move(c));
    }
    ASSERT_EQ(::kill(d->pid(), SIGCONT), 0);
    // The flood has ended (it holds its sockets, and sends nothing more): a new client is
    // served.
    auto root = connect_as(0, 0, {});
    ASSERT_NE(root, nullptr);
    const auto status = status_of(*root);
    ASSERT_TRUE(status) << "the daemon no longer accepts: " << d->log().substr(0, 4000);
    EXPECT_GE(status->reply.counters.accepted, 5u) << status->text;
    expect_the_loop_serves_others("the flood's admitted handshakes");
}

// Item 2: `ptyvisor run` blocked SIGINT, SIGTERM and SIGHUP before connect(), and a connect
// to a full listen queue waited without limit: nothing short of SIGKILL ended it.
TEST_F(ClientBound, RunEndsOnSigintWhileItWaitsForAFullListenQueue) {
    const std::string path = *dir_ / "full.sock";
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
    ASSERT_EQ(::listen(listener.get(), 0), 0);
    // Never accepted: one waiting connection fills the queue.
    UniqueFd queued(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(::connect(queued.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    auto run = run_cli({"run", "--socket", path, "--", "true"});
    ASSERT_NE(run, nullptr);
    // Waits until the client is inside connect(2) (system call 42 on x86-64, 203 on arm64).
    const std::string syscall_file = "/proc/" + std::to_string(run->pid()) + "/syscall";
    const auto deadline = Clock::now() + kAnswer;
    bool connecting = false;
    while (!connecting && Clock::now() < deadline) {
        const std::string now = read_text_file(syscall_file);
        connecting = now.starts_with("42 ") || now.starts_with("203 ");
        if (!connecting) std::this_thread::sleep_for(Millis(20));
    }
    ASSERT_TRUE(connecting) << "the client never waited in connect(2)";
    run->signal(SIGINT);
    const auto exit = run->wait_exit(kAnswer);
    ASSERT_TRUE(exit) << "SIGINT did not end `ptyvisor run` while it connected";
    EXPECT_EQ(exit->how, CLD_KILLED);
    EXPECT_EQ(exit->status, SIGINT);
}

// Item 3: each SIGNAL walked the session's processes (/proc for each), and a controller
// could send them as fast as it writes.
TEST_F(ClientBound, ASignalFloodFromTheControllerDoesNotFreezeTheLoop) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(start_session(*c, {"sh", "-c", "for i in $(seq 300); do sleep 600 & done; echo ready; wait"}));
    std::string seen;
    ASSERT_TRUE(c->read_output_until("ready", Millis(30000), &seen)) << seen;
    // 300 processes: a SIGNAL to all of them costs milliseconds; 40000 of them, minutes.
    const auto frame = protocol::encode_frame(
        FrameType::Signal, protocol::encode(protocol::SignalRequest{SIGWINCH, protocol::SignalTarget::Session}));
    std::vector<std::uint8_t> burst;
    for (int i = 0; i < 40000; ++i) burst.insert(burst.end(), frame.begin(), frame.end());
    // Sent from a thread: a frozen daemon stops reading, and the send waits for it.
    std::thread sender([&] { c->send(burst); });
    expect_the_loop_serves_others("a SIGNAL flood");
    sender.join();
}

// Item 4: WAIT for text ran RE2 over the whole log on the loop. Where RE2's DFA gives up
// (random a/b text under a[ab]{990}c), each byte costs about 16 us: 90 s for this log.
TEST_F(ClientBound, AWaitForACostlyPatternDoesNotFreezeTheLoop) {
    DaemonConfig cfg = config();
    cfg.output_log_bytes = 8 << 20;
    ASSERT_NE(start_daemon(cfg), nullptr);
    const std::string id = start_detached(
        {"python3", "-c", "import random, sys; sys.stdout.write(''.join(random.choices('ab', k=6000000)))"});
    ASSERT_FALSE(id.empty());
    const auto exited = wait_exit(id, 60000);
    ASSERT_TRUE(exited && exited->matched);
    auto waiter = connect_as_account();
    ASSERT_NE(waiter, nullptr);
    ASSERT_EQ(waiter->send_frame(FrameType::Wait, protocol::encode(text_wait(id, "a[ab]{990}c", 600000))), 0);
    expect_the_loop_serves_others("a costly WAIT");
    // The search goes on, in turns: the waiter has had no answer (no match is possible).
    const auto in = waiter->next(Millis(200));
    EXPECT_EQ(in.kind, Incoming::Kind::Timeout) << in.describe();
}

TEST_F(ClientBound, AWaitPatternWhoseProgramIsTooLargeIsRefused) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_detached({"true"});
    ASSERT_FALSE(id.empty());
    const auto frames = request(FrameType::Wait, protocol::encode(text_wait(id, "a[ab]{999}c|b[ab]{999}d", 1000)));  // over 2000 instructions
    EXPECT_EQ(error_of(frames), "bad_frame");
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_NE(std::string(frames.front().text()).find("too complex"), std::string::npos) << frames.front().text();
}

// Item 5: a session process the kernel could not kill made the cleanup miss its deadline;
// the daemon failed closed and exited, and every later start exited too, at
// cleanup_orphans, while the process stayed.
TEST_F(ClientBound, AnUnkillableSessionProcessStopsNeitherTheDaemonNorItsNextStart) {
    DaemonConfig cfg = config();
    cfg.cleanup = 2;
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    const auto started = start_session(*c, {"sh", "-c", "echo ready; exec sleep 600"});
    ASSERT_TRUE(started);
    std::string seen;
    ASSERT_TRUE(c->read_output_until("ready", kAnswer, &seen)) << seen;
    Unkillable stuck(static_cast<pid_t>(started->pid), dir_->path());
    ASSERT_TRUE(stuck.frozen()) << stuck.error();
    ASSERT_EQ(c->send_frame(FrameType::Stop, ""), 0);
    // Quarantined: its EXIT comes once the cleanup deadline has passed.
    ASSERT_TRUE(c->read_until_exit(Millis(60000), &seen)) << seen;
    ASSERT_TRUE(d->running()) << d->log();
    expect_the_loop_serves_others("a session whose process could not be killed");
    const auto status = status_as_root();
    ASSERT_TRUE(status);
    EXPECT_EQ(status->reply.counters.quarantined, 1u) << status->text;
    // The next start finds the process still there, and serves all the same.
    const auto stopped = d->stop(SIGTERM, Millis(60000));
    ASSERT_TRUE(stopped);
    EXPECT_TRUE(stopped->exited_with(0)) << stopped->describe();
    DaemonProcess* again = start_daemon(cfg);
    ASSERT_NE(again, nullptr) << "the daemon does not start while an unkillable process is left";
    expect_the_loop_serves_others("a start that found an unkillable process left");
    stuck.release();
}

// Also from issue 24: a direct-backend session started with the daemon's resource limits
// (root's NPROC, the daemon's own descriptor limit), not the agent's. Both backends now give
// it the limits of the agent process that asked.
TEST_F(ClientBound, ASessionHasTheAgentsResourceLimitsNotTheDaemons) {
    ASSERT_NE(start_daemon(), nullptr);
    std::string error;
    auto agent = ClientProcess::spawn(
        "/bin/sh", {"-c", "ulimit -S -n 200 && exec \"$0\" run -- sh -c 'echo \"nofile=$(ulimit -S -n)\"'", cli_binary()},
        *account_, client_options(ClientOptions::Stdin::Null), error);
    ASSERT_NE(agent, nullptr) << error;
    const auto exit = agent->wait_exit(Millis(30000));
    ASSERT_TRUE(exit) << agent->transcript();
    EXPECT_TRUE(exit->exited_with(0)) << agent->transcript();
    EXPECT_NE(agent->text().find("nofile=200\n"), std::string::npos) << agent->transcript();
}

// Item 10: a session may not start sessions, but a process of the session could ptrace
// another process of the account, outside it, and have that one ask. A traced peer is refused.
TEST_F(ClientBound, APeerTracedByASessionIsRefused) {
    ASSERT_NE(start_daemon(), nullptr);
    std::string error;
    // The agent's process waits for a line, then asks for a session.
    auto options = client_options(ClientOptions::Stdin::Pipe);
#if defined(__SANITIZE_ADDRESS__)
    // LeakSanitizer cannot run in a traced process: it would fail the client's exit.
    options.env.push_back("ASAN_OPTIONS=detect_leaks=0");
#endif
    auto agent = ClientProcess::spawn("/bin/sh", {"-c", "read go && exec \"$0\" run -- true", cli_binary()},
                                      *account_, options, error);
    ASSERT_NE(agent, nullptr) << error;
    const std::string tracer = start_detached(
        {"python3", "-c",
         "import ctypes, os\n"
         "pid = " + std::to_string(agent->pid()) + "\n"
         "libc = ctypes.CDLL(None, use_errno=True)\n"
         "r = libc.ptrace(0x4206, pid, 0, 0)\n"  // PTRACE_SEIZE
         "print('seized', r, ctypes.get_errno(), flush=True)\n"
         // A tracer sees its tracee's stops and its end first: pass them on, as a debugger does.
         "while r == 0:\n"
         "    _, status = os.waitpid(pid, 0)\n"
         "    if not os.WIFSTOPPED(status): break\n"
         "    libc.ptrace(7, pid, 0, os.WSTOPSIG(status))\n"});  // PTRACE_CONT
    ASSERT_FALSE(tracer.empty());
    ASSERT_TRUE(wait(text_wait(tracer, "seized -?[0-9]+ [0-9]+", 10000)));
    const auto log = read_log(tracer);
    ASSERT_TRUE(log);
    ASSERT_NE(log->bytes.find("seized 0 0"), std::string::npos) << "the session could not trace: " << log->bytes;
    ASSERT_TRUE(agent->write_input("go\n"));
    const auto exit = agent->wait_exit(Millis(30000));
    ASSERT_TRUE(exit) << agent->transcript();
    EXPECT_TRUE(exit->exited_with(255)) << agent->transcript();
    EXPECT_NE(agent->err().find("traced"), std::string::npos) << agent->transcript();
}

// Item 6: READ copied its whole reply into the connection's queue; 600 READs that nobody
// read grew the daemon by 1.2 GB.
TEST_F(ClientBound, ReadRepliesLeftUnreadDoNotGrowTheDaemon) {
    DaemonConfig cfg = config();
    cfg.output_log_bytes = 2 << 20;
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    const std::string id = start_detached({"sh", "-c", "head -c 2000000 /dev/zero | tr '\\0' x"});
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(wait_exit(id, 30000));
    const long before = d->rss_kib();
    std::vector<std::unique_ptr<RawClient>> readers;
    int shortened = 0, busy = 0;
    for (int i = 0; i < 200; ++i) {
        auto c = connect_as_account();
        ASSERT_NE(c, nullptr);
        ASSERT_EQ(c->send_frame(FrameType::Read, protocol::encode(protocol::ReadRequest{
                                                     id, {protocol::LogPosition::Kind::Start, 0}, protocol::kMaxReadBytes})),
                  0);
        // Only the first frame is read: the rest of the reply waits in the daemon.
        auto in = c->next(kAnswer);
        ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
        if (in.frame.type == FrameType::Log) {
            const auto log = protocol::decode_log(in.frame.text());
            ASSERT_TRUE(log) << log.error;
            if (log.value->length < log.value->end - log.value->offset) ++shortened;
        } else {
            ASSERT_EQ(in.frame.type, FrameType::Error) << in.describe();
            ++busy;
        }
        readers.push_back(std::move(c));
    }
    const long grown = d->rss_kib() - before;
    EXPECT_LT(grown, 64 * 1024) << "KiB grown with 200 unread READs of a 2 MB log";
    EXPECT_GT(shortened + busy, 0) << "every READ was granted in full";
    expect_the_loop_serves_others("200 unread READs");
}

// Item 7: ended sessions with a reader attached were not counted toward the number kept;
// observers that never read kept any number of them, each with its log and its screen.
TEST_F(ClientBound, ReadersDoNotKeepEndedSessionsPastTheBound) {
    DaemonConfig cfg = config();
    cfg.max_sessions = 3;
    cfg.operation = 600;  // the observers that never read are not cut off here
    ASSERT_NE(start_daemon(cfg), nullptr);
    std::vector<std::unique_ptr<RawClient>> observers;
    std::vector<std::string> ids;
    for (int i = 0; i < 8; ++i) {
        const std::string id = start_detached({"sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x"});
        ASSERT_FALSE(id.empty());
        ASSERT_TRUE(wait_exit(id, 30000));
        auto o = attach(id, /*observe=*/true, false, {protocol::LogPosition::Kind::Start, 0});
        ASSERT_NE(o, nullptr);
        ASSERT_TRUE(expect_attached(*o));
        observers.push_back(std::move(o));  // and never read again: 1 MB of replay waits
        ids.push_back(id);
    }
    const auto sessions = list();
    EXPECT_LE(sessions.size(), 3u);
    bool newest_kept = false;
    for (const auto& s : sessions) newest_kept = newest_kept || s.id == ids.back();
    EXPECT_TRUE(newest_kept) << "the oldest go first";
}

// Item 8: each recording was bounded, their total was not: sixteen sessions printing NULs
// (six bytes of JSON each) filled a file system in ten seconds.
TEST_F(ClientBound, RecordingsStopAtTheirTotalBound) {
    DaemonConfig cfg = config();
    cfg.recording_directory = *dir_ / "recordings";
    cfg.recording_max_bytes = 1 << 20;
    cfg.recording_max_total_bytes = 2 << 20;
    ASSERT_NE(start_daemon(cfg), nullptr);
    for (int i = 0; i < 4; ++i) {
        const std::string id = start_detached({"sh", "-c", "head -c 1500000 /dev/zero"});
        ASSERT_FALSE(id.empty());
        ASSERT_TRUE(wait_exit(id, 60000));
    }
    // Headers and each file's closing marker may pass the bound, by a few hundred bytes each.
    EXPECT_LE(cast_bytes(cfg.recording_directory), (2u << 20) + 4 * 4096);
    bool marked = false;
    for (const auto& e : fs::directory_iterator(cfg.recording_directory))
        marked = marked || read_text_file(e.path()).find("max_total_bytes") != std::string::npos;
    EXPECT_TRUE(marked) << "no recording says why it stopped";
}

}  // namespace
}  // namespace ptyvisor::itest
