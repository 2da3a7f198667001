// Sandbox profiles enforced by the systemd backend, against a real systemd 252 inside the
// harness (tests/systemd/run.sh). Two harness layouts run this binary:
//  - systemd_profiles: tests/harness/up.sh, a pure cgroup v2 hierarchy. On this build machine
//    every controller is bound to v1, so systemd there enforces no MemoryMax=/TasksMax=/
//    CPUQuota=: the backend must refuse those profiles (and the limit tests check that).
//  - systemd_profiles_hybrid: tests/systemd/up-hybrid.sh, the host's v1 controllers, as a
//    systemd on this machine would see them: the limits are enforced, and
//    PTYVISOR_EXPECT_LIMITS=1 makes a refusal a failure.
// Network and file-system confinement are namespaces and run in both.
//
// Every wait drives the sd-event loop until a condition holds; nothing sleeps to synchronise.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/systemd/host_enforcement.h"
#include "backends/systemd/sd_ptr.h"
#include "backends/systemd/systemd_backend.h"
#include "backends/systemd/unit_usage.h"
#include "common/event.h"
#include "common/process.h"
#include "common/unique_fd.h"

namespace ptyvisor::backends {
namespace {

using namespace std::chrono_literals;
using protocol::ExitStatus;
namespace fs = std::filesystem;

constexpr const char* kAccount = "ptyvisor-test";

bool run_until(sd_event* e, const std::function<bool()>& done, std::chrono::milliseconds timeout = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= 0s) return done();
        if (sd_event_run(e, static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(left).count())) < 0)
            return done();
    }
    return true;
}

struct Pty {
    UniqueFd master, slave;
    std::string path, output;
    EventSource source;
    bool open(sd_event* e) {
        master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
        if (!master || ::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) return false;
        char name[128];
        if (::ptsname_r(master.get(), name, sizeof name) != 0) return false;
        path = name;
        slave.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
        sd_event_source* s = nullptr;
        if (!slave || sd_event_add_io(e, &s, master.get(), EPOLLIN, &Pty::on_readable, this) < 0) return false;
        source.reset(s);
        return true;
    }
    static int on_readable(sd_event_source* s, int fd, uint32_t, void* userdata) {
        auto* self = static_cast<Pty*>(userdata);
        char buf[4096];
        for (;;) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) { self->output.append(buf, static_cast<size_t>(n)); continue; }
            if (n < 0 && errno == EAGAIN) return 0;
            sd_event_source_set_enabled(s, SD_EVENT_OFF);
            return 0;
        }
    }
    bool contains(const std::string& s) const { return output.find(s) != std::string::npos; }
};

struct Observed {
    bool started = false, start_failed = false, exited = false;
    std::string start_error;
    ExitStatus status;
};

SessionEvents observe(Observed& o) {
    SessionEvents ev;
    ev.on_started = [&o](pid_t) { o.started = true; };
    ev.on_start_failed = [&o](std::string why) { o.start_failed = true; o.start_error = std::move(why); };
    ev.on_exited = [&o](ExitStatus s) { o.exited = true; o.status = std::move(s); };
    return ev;
}

std::string random_unit() {
    unsigned char bytes[16];
    EXPECT_EQ(::getrandom(bytes, sizeof bytes, 0), 16);
    static const char* hex = "0123456789abcdef";
    std::string name = "ptyvisor-";
    for (unsigned char b : bytes) { name += hex[b >> 4]; name += hex[b & 15]; }
    return name + ".service";
}

bool expect_limits() {
    const char* v = std::getenv("PTYVISOR_EXPECT_LIMITS");
    return v && std::string(v) == "1";
}

class ProfileTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(::geteuid(), 0u) << "run as root, inside the harness (tests/systemd/run.sh)";
        ASSERT_EQ(sd_event_new(&event_), 0);
        const passwd* pw = ::getpwnam(kAccount);
        ASSERT_NE(pw, nullptr) << "missing account " << kAccount;
        account_.name = pw->pw_name;
        account_.uid = pw->pw_uid;
        account_.gid = pw->pw_gid;
        account_.home = pw->pw_dir;
        BackendOptions o;
        o.event = event_;
        std::string why;
        backend_ = make_systemd_backend(o, why);
        ASSERT_TRUE(backend_) << why;
        // A working directory and an "outside" one, both the account's: only the profile's
        // read-only mounts can refuse a write there. Not under /tmp (PrivateTmp= hides it).
        base_ = fs::path("/srv") / ("ptyvisor-profile-test-" + random_unit().substr(9, 12));
        for (const auto& d : {base_, base_ / "work", base_ / "outside", base_ / "hidden"}) {
            fs::create_directories(d);
            ASSERT_EQ(::chown(d.c_str(), account_.uid, account_.gid), 0);
        }
        std::ofstream(base_ / "outside" / "file") << "original\n";
        std::ofstream(base_ / "hidden" / "secret") << "secret\n";
        for (const auto& f : {base_ / "outside" / "file", base_ / "hidden" / "secret"})
            ASSERT_EQ(::chown(f.c_str(), account_.uid, account_.gid), 0);
    }
    void TearDown() override {
        sessions_.clear();
        backend_.reset();
        sd_event_unref(event_);
        std::error_code ec;
        if (!base_.empty()) fs::remove_all(base_, ec);
    }

    SessionSpec spec(std::vector<std::string> argv, Pty& pty, const fs::path& cwd) {
        SessionSpec s;
        s.unit_name = random_unit();
        s.argv = std::move(argv);
        s.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "HOME=/nonexistent", "USER=" + account_.name, "LANG=C"};
        cwds_.emplace_back(::open(cwd.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        s.cwd = cwds_.back().get();
        struct stat st {};
        EXPECT_EQ(::fstat(s.cwd, &st), 0);
        s.cwd_dev = st.st_dev;
        s.cwd_ino = st.st_ino;
        s.tty = UniqueFd(::fcntl(pty.slave.get(), F_DUPFD_CLOEXEC, 3));
        s.tty_path = pty.path;
        s.account = account_;
        return s;
    }

    // Resolves and starts; nullptr with `why` when the backend refuses.
    SessionProcesses* start(std::vector<std::string> argv, Pty& pty, Observed& o, std::optional<SandboxProfile> profile,
                            std::string& why, std::map<std::string, std::string> props = {}) {
        EXPECT_TRUE(pty.open(event_));
        SessionSpec s = spec(std::move(argv), pty, base_ / "work");
        s.profile = std::move(profile);
        s.properties = std::move(props);
        pty.slave.reset();
        if (const auto resolve = backend_->resolver(); resolve && !resolve(s, why)) return nullptr;
        auto session = backend_->start(std::move(s), observe(o), why);
        if (!session) return nullptr;
        sessions_.push_back(std::move(session));
        return sessions_.back().get();
    }

    // Runs `script` under `profile` to its end; returns its output.
    std::string run(const std::string& script, std::optional<SandboxProfile> profile, Observed& o) {
        Pty pty;
        std::string why;
        SessionProcesses* s = start({"/bin/bash", "-c", script}, pty, o, std::move(profile), why);
        EXPECT_TRUE(s) << why;
        if (!s) return {};
        EXPECT_TRUE(run_until(event_, [&] { return o.exited || o.start_failed; })) << pty.output;
        EXPECT_FALSE(o.start_failed) << o.start_error;
        // The output written before the exit is in the PTY; drain it.
        run_until(event_, [&] { return pty.contains("END"); }, 5s);
        stop(*s);
        return pty.output;
    }

    void stop(SessionProcesses& s) {
        bool done = false, ok = false;
        std::string why;
        s.stop(Clock::now() + 10s, [&](bool k, std::string w) { done = true; ok = k; why = std::move(w); });
        EXPECT_TRUE(run_until(event_, [&] { return done; }));
        EXPECT_TRUE(ok) << why;
    }

    // The limit tests: whether this host's systemd enforces `profile`. Where it does not, the
    // backend must refuse it, with a reason, and start() must refuse it too; that is checked
    // here and the caller stops.
    bool enforced_here(const SandboxProfile& profile, const char* controller) {
        std::string why;
        if (backend_->check_profile(profile, why)) return true;
        EXPECT_FALSE(expect_limits()) << "this harness should enforce " << controller << ": " << why;
        EXPECT_NE(why.find(controller), std::string::npos) << why;
        Pty pty;
        Observed o;
        std::string start_why;
        EXPECT_EQ(start({"/bin/true"}, pty, o, profile, start_why), nullptr) << "started under an unenforceable profile";
        EXPECT_NE(start_why.find(controller), std::string::npos) << start_why;
        std::cout << "[ refused  ] " << why << "\n";
        return false;
    }

    sd_event* event_ = nullptr;
    Account account_;
    std::unique_ptr<Backend> backend_;
    std::vector<UniqueFd> cwds_;
    std::vector<std::unique_ptr<SessionProcesses>> sessions_;
    fs::path base_;
};

SandboxProfile named(const char* name) {
    SandboxProfile p;
    p.name = name;
    return p;
}

// A TCP listener on 127.0.0.1 in the test's (the host's) network namespace.
struct LoopbackServer {
    UniqueFd fd;
    int port = 0;
    LoopbackServer() {
        fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd.get(), 8) != 0 ||
            ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
            return;
        port = ntohs(a.sin_port);
    }
    bool accepted_one() { return UniqueFd(::accept4(fd.get(), nullptr, nullptr, SOCK_CLOEXEC)).get() >= 0; }
};

// bash's /dev/tcp: "CONNECT-OK" or "CONNECT-FAILED" for 127.0.0.1:PORT.
std::string connect_script(int port) {
    return "if exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) +
           "; then echo CONNECT-OK; else echo CONNECT-FAILED; fi; ";
}

TEST_F(ProfileTest, HostReportsWhatItEnforces) {
    const auto& host = static_cast<SystemdBackend&>(*backend_).host();
    std::cout << "[ host     ] " << systemd::describe(host) << "\n";
    EXPECT_GE(host.systemd_version, 232u);
    EXPECT_NE(host.layout, systemd::CgroupLayout::None);
    if (expect_limits()) {
        EXPECT_TRUE(host.memory && host.pids && host.cpu) << systemd::describe(host);
    }
}

// Attack: under network "none" the session reaches a service the host offers on loopback.
TEST_F(ProfileTest, NetworkNoneBlocksAConnectToALoopbackServerOutside) {
    LoopbackServer server;
    ASSERT_GT(server.port, 0);
    // Without the profile the same connect works: the test can tell the two apart.
    Observed open_o;
    EXPECT_NE(run(connect_script(server.port) + "echo END", std::nullopt, open_o).find("CONNECT-OK"), std::string::npos);
    EXPECT_TRUE(server.accepted_one());

    SandboxProfile p = named("offline");
    p.network = SandboxProfile::Network::None;
    std::string why;
    ASSERT_TRUE(backend_->check_profile(p, why)) << why;
    Observed o;
    // Its own loopback works: a listener and a connect inside the session.
    const std::string out = run(connect_script(server.port) +
                                    "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(1); "
                                    "c=socket.create_connection(s.getsockname()); print(\"OWN-LOOPBACK-OK\")'; echo END",
                                p, o);
    EXPECT_NE(out.find("CONNECT-FAILED"), std::string::npos) << out;
    EXPECT_EQ(out.find("CONNECT-OK"), std::string::npos) << out;
    EXPECT_NE(out.find("OWN-LOOPBACK-OK"), std::string::npos) << out;
    EXPECT_FALSE(server.accepted_one());
}

// Attack: under the read-only file system the session writes outside its working directory,
// by a path, a symlink, "..", a hard link, /proc/self/root and a directory fd through /dev/fd.
TEST_F(ProfileTest, ReadOnlyFilesystemRefusesWritesOutsideTheWorkingDirectory) {
    SandboxProfile p = named("readonly");
    p.filesystem = SandboxProfile::Filesystem::ReadOnly;
    p.writable_cwd = true;
    std::string why;
    ASSERT_TRUE(backend_->check_profile(p, why)) << why;
    const std::string out_dir = (base_ / "outside").string();
    const std::string f = out_dir + "/file";
    fs::create_symlink(f, base_ / "work" / "link");
    const std::string script =
        "try() { if ( eval \"$2\" ) 2>/tmp/err; then echo \"ROUTE $1 WROTE\"; else echo \"ROUTE $1 refused: $(cat /tmp/err)\"; fi; }; "
        "try path 'echo x > " + f + "'; "
        "try symlink 'echo x > link'; "
        "try dotdot 'echo x > ../outside/file'; "
        "try hardlink 'ln " + f + " hl && echo x >> hl'; "
        "try procroot 'echo x > /proc/self/root" + f + "'; "
        "try devfd 'exec 7<" + out_dir + " && echo x > /dev/fd/7/file'; "
        "try newfile 'echo x > " + out_dir + "/new'; "
        "try etc 'echo x > /etc/ptyvisor-profile-test'; "
        "try devshm 'echo x > /dev/shm/ptyvisor-profile-test'; "
        "echo inside > inside.txt && echo CWD-WRITABLE; "
        "echo t > /tmp/t && echo TMP-WRITABLE; echo END";
    Observed o;
    const std::string out = run(script, p, o);
    std::cout << out;
    EXPECT_NE(out.find("CWD-WRITABLE"), std::string::npos) << out;
    EXPECT_NE(out.find("TMP-WRITABLE"), std::string::npos) << out;
    for (const char* route : {"path", "symlink", "dotdot", "hardlink", "procroot", "devfd", "newfile", "etc"}) {
        EXPECT_NE(out.find(std::string("ROUTE ") + route + " refused"), std::string::npos) << route << "\n" << out;
        EXPECT_EQ(out.find(std::string("ROUTE ") + route + " WROTE"), std::string::npos) << route;
    }
    std::ifstream in(f);
    std::string content((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(content, "original\n") << "the outside file was written";
    EXPECT_FALSE(fs::exists(base_ / "outside" / "new"));
    EXPECT_FALSE(fs::exists("/etc/ptyvisor-profile-test"));
    // /dev/shm is the session's own: a write there lands nowhere the host sees.
    EXPECT_FALSE(fs::exists("/dev/shm/ptyvisor-profile-test"));
    EXPECT_TRUE(fs::exists(base_ / "work" / "inside.txt"));

    // The control: without the profile the path route writes (the account may write there).
    Observed open_o;
    run("echo changed > " + f + "; echo END", std::nullopt, open_o);
    std::ifstream again(f);
    std::string after((std::istreambuf_iterator<char>(again)), {});
    EXPECT_EQ(after, "changed\n");
}

// Attack: the agent's own unit keeps everything but its working tree read-only; a profile
// whose `writable` names another directory would reopen it to the agent's sessions through
// ReadWritePaths=. The session keeps the agent's read-only view there.
TEST_F(ProfileTest, AProfileCannotReopenWhatTheAgentsUnitKeepsReadOnly) {
    const std::string agent = "ptyvisor-test-agent.service";
    std::system("systemctl stop ptyvisor-test-agent.service 2>/dev/null");
    ASSERT_EQ(std::system(("systemd-run --quiet --unit=ptyvisor-test-agent -p ProtectSystem=strict -p ReadWritePaths=" +
                           (base_ / "work").string() + " sleep 1000").c_str()),
              0);
    BackendOptions o;
    o.event = event_;
    o.allowed_units = {agent};
    std::string why;
    backend_ = make_systemd_backend(o, why);
    ASSERT_TRUE(backend_) << why;
    SandboxProfile p = named("reopen");
    p.filesystem = SandboxProfile::Filesystem::ReadOnly;
    p.writable_cwd = true;
    p.writable = {(base_ / "outside").string()};
    Observed ob;
    const std::string out = run("echo x > " + (base_ / "outside" / "file").string() +
                                    " && echo OUTSIDE-WRITTEN; echo in > inside && echo CWD-WRITABLE; echo END",
                                p, ob);
    EXPECT_EQ(out.find("OUTSIDE-WRITTEN"), std::string::npos) << out;
    EXPECT_NE(out.find("Read-only file system"), std::string::npos) << out;
    EXPECT_NE(out.find("CWD-WRITABLE"), std::string::npos) << out;
    std::system("systemctl stop ptyvisor-test-agent.service");
}

// A working directory under /tmp, which the private /tmp would hide: it is bound in, writable,
// and what the session writes there is the host's.
TEST_F(ProfileTest, AWorkingDirectoryUnderTmpStaysWritable) {
    char tmpl[] = "/tmp/ptyvisor-profile-cwd-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const fs::path cwd(tmpl);
    ASSERT_EQ(::chown(cwd.c_str(), account_.uid, account_.gid), 0);
    SandboxProfile p = named("readonly");
    p.filesystem = SandboxProfile::Filesystem::ReadOnly;
    p.writable_cwd = true;
    Pty pty;
    Observed o;
    ASSERT_TRUE(pty.open(event_));
    SessionSpec s = spec({"/bin/sh", "-c", "echo in > inside && echo CWD-WRITABLE; ls /tmp | wc -l; echo END"}, pty, cwd);
    s.profile = p;
    pty.slave.reset();
    std::string why;
    ASSERT_TRUE(backend_->resolver()(s, why)) << why;
    auto session = backend_->start(std::move(s), observe(o), why);
    ASSERT_TRUE(session) << why;
    ASSERT_TRUE(run_until(event_, [&] { return o.exited || o.start_failed; }));
    EXPECT_FALSE(o.start_failed) << o.start_error;
    run_until(event_, [&] { return pty.contains("END"); }, 5s);
    EXPECT_NE(pty.output.find("CWD-WRITABLE"), std::string::npos) << pty.output;
    EXPECT_TRUE(fs::exists(cwd / "inside"));
    stop(*session);
    std::error_code ec;
    fs::remove_all(cwd, ec);
}

// Attack: a hidden path is read from the session.
TEST_F(ProfileTest, HiddenPathsCannotBeRead) {
    SandboxProfile p = named("hide");
    p.hidden = {(base_ / "hidden").string()};
    Observed o;
    const std::string out = run("cat " + (base_ / "hidden" / "secret").string() + " || echo NOT-READ; echo END", p, o);
    EXPECT_EQ(out.find("secret\r\n"), std::string::npos) << out;
    EXPECT_NE(out.find("NOT-READ"), std::string::npos) << out;
}

// The profile never loosens the enforced sandbox: no_new_privs and the empty bounding set.
TEST_F(ProfileTest, TheEnforcedSandboxStaysUnderAProfile) {
    SandboxProfile p = named("all");
    p.network = SandboxProfile::Network::None;
    p.filesystem = SandboxProfile::Filesystem::ReadOnly;
    p.writable_cwd = true;
    Observed o;
    const std::string out = run("grep -E '^(NoNewPrivs|CapBnd)' /proc/self/status; echo END", p, o);
    EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
    EXPECT_NE(out.find("CapBnd:\t0000000000000000"), std::string::npos) << out;
}

// Attack: a fork bomb. It stops at the task limit, inside its unit.
TEST_F(ProfileTest, ForkBombStopsAtTasksMax) {
    SandboxProfile p = named("tasks");
    p.tasks_max = 32;
    if (!enforced_here(p, "pids")) return;
    Observed o;
    Pty pty;
    std::string why;
    // Forks until refused, then reports how many it got and exits (its children with it).
    SessionProcesses* s = start({"/usr/bin/python3", "-c",
                                 "import os,time\nn=0\npids=[]\n"
                                 "while True:\n"
                                 "  try: pid=os.fork()\n"
                                 "  except OSError as e: print('FORK-REFUSED', n, e.errno, flush=True); break\n"
                                 "  if pid==0: time.sleep(60); os._exit(0)\n"
                                 "  n+=1; pids.append(pid)\n"
                                 "  if n>=1000: print('NO-LIMIT', flush=True); break\n"
                                 "import sys; sys.stdin.readline()\n"},
                                pty, o, p, why);
    ASSERT_TRUE(s) << why;
    ASSERT_TRUE(run_until(event_, [&] { return pty.contains("FORK-REFUSED") || pty.contains("NO-LIMIT") || o.exited; }))
        << pty.output;
    EXPECT_NE(pty.output.find("FORK-REFUSED 31 11"), std::string::npos) << pty.output;  // EAGAIN; 32 with python
    const auto used = s->usage();
    ASSERT_TRUE(used);
    EXPECT_EQ(used->tasks_current.value_or(0), 32u);
    EXPECT_GE(used->tasks_limit_hits.value_or(0), 1u);
    std::cout << "[ usage    ] tasks " << used->tasks_current.value_or(0) << " peak " << used->tasks_peak.value_or(0)
              << " refused forks " << used->tasks_limit_hits.value_or(0) << "\n";
    stop(*s);
}

// Attack: a memory hog. The OOM killer ends it inside its unit; a neighbour session lives on.
TEST_F(ProfileTest, MemoryHogIsOomKilledInItsUnitOnly) {
    SandboxProfile p = named("memory");
    p.memory_max = 64ull << 20;
    if (!enforced_here(p, "memory")) return;
    Pty npty;
    Observed neighbour;
    std::string why;
    SessionProcesses* n = start({"sleep", "300"}, npty, neighbour, std::nullopt, why);
    ASSERT_TRUE(n) << why;
    Pty pty;
    Observed o;
    // It starts eating once told to, after on_started: the backend watches the unit's cgroup
    // from then on.
    SessionProcesses* s = start({"/usr/bin/python3", "-c",
                                 "import sys\nsys.stdin.readline()\nb=[]\nwhile True: b.append(bytearray(1<<20))\n"},
                                pty, o, p, why);
    ASSERT_TRUE(s) << why;
    ASSERT_TRUE(run_until(event_, [&] { return o.started; }));
    ASSERT_EQ(::write(pty.master.get(), "go\n", 3), 3);
    ASSERT_TRUE(run_until(event_, [&] { return o.exited && neighbour.started; }, 60s));
    EXPECT_EQ(o.status.kind, ExitStatus::Kind::Signaled);
    EXPECT_EQ(o.status.signal, SIGKILL);
    EXPECT_EQ(o.status.unit_result, "oom-kill");
    const auto used = s->usage();  // after the exit, until stop()
    ASSERT_TRUE(used);
    EXPECT_GE(used->oom_kills.value_or(0), 1u);
    EXPECT_LE(used->memory_peak.value_or(0), 64ull << 20);
    EXPECT_GE(used->memory_peak.value_or(0), 48ull << 20);
    std::cout << "[ usage    ] peak " << used->memory_peak.value_or(0) << " oom kills " << used->oom_kills.value_or(0)
              << "\n";
    EXPECT_FALSE(neighbour.exited) << "the neighbour session was killed too";
    stop(*s);
    stop(*n);
}

// Attack: a CPU hog takes more than its quota. Over one second of wall time it gets at most
// its share (20% of one CPU, plus one 100 ms CFS period of slack); the usage figure agrees.
TEST_F(ProfileTest, CpuHogIsHeldToItsQuota) {
    SandboxProfile p = named("cpu");
    p.cpu_quota_percent = 20;
    if (!enforced_here(p, "cpu")) return;
    Observed o;
    const std::string out = run("python3 -c 'import time,os\nt=time.monotonic()\nwhile time.monotonic()-t<1.0: pass\n"
                                "c=os.times(); print(\"CPU-SHARE %.3f\" % ((c.user+c.system)/(time.monotonic()-t)))'; echo END",
                                p, o);
    const auto at = out.find("CPU-SHARE ");
    ASSERT_NE(at, std::string::npos) << out;
    const double share = std::stod(out.substr(at + 10));
    std::cout << "[ measured ] CPU share under a 20% quota: " << share << "\n";
    EXPECT_LT(share, 0.35);
    EXPECT_GT(share, 0.05);
}

// usage() reads what the unit's cgroup files say, and answers after the exit until stop().
TEST_F(ProfileTest, UsageAgreesWithTheCgroupFiles) {
    Pty pty;
    Observed o;
    std::string why;
    SessionProcesses* s = start({"/bin/bash", "-c", "x=$(head -c 30000000 /dev/zero | wc -c); echo READY; read line"},
                                pty, o, std::nullopt, why);
    ASSERT_TRUE(s) << why;
    ASSERT_TRUE(run_until(event_, [&] { return pty.contains("READY"); }));
    const auto used = s->usage();
    ASSERT_TRUE(used);
    const auto& host = static_cast<SystemdBackend&>(*backend_).host();
    const auto cg = PidRef::pin(s->main_pid())->cgroup();
    ASSERT_TRUE(cg);
    const auto direct = systemd::read_unit_usage(host, *cg);
    ASSERT_TRUE(direct);
    EXPECT_GT(used->cpu_usec.value_or(0), 0u);
    EXPECT_EQ(used->tasks_current, direct->tasks_current);
    if (direct->memory_peak) {
        EXPECT_EQ(used->memory_peak, direct->memory_peak);
    }
    const auto cpu_text = read_small_file(host.unified_mount + *cg + "/cpu.stat");
    ASSERT_TRUE(cpu_text);
    const auto cpu = systemd::keyed_value(*cpu_text, "usage_usec").value_or(0);
    EXPECT_NEAR(static_cast<double>(used->cpu_usec.value_or(0)), static_cast<double>(cpu), static_cast<double>(cpu) * 0.01 + 1);
    std::cout << "[ usage    ] cpu_usec " << used->cpu_usec.value_or(0) << " (cpu.stat " << cpu << ") memory "
              << used->memory_current.value_or(0) << " peak " << used->memory_peak.value_or(0) << " tasks "
              << used->tasks_current.value_or(0) << "\n";
    ASSERT_EQ(::write(pty.master.get(), "\n", 1), 1);
    ASSERT_TRUE(run_until(event_, [&] { return o.exited; }));
    const auto after = s->usage();
    ASSERT_TRUE(after) << "usage must answer after the exit, until stop()";
    EXPECT_GE(after->cpu_usec.value_or(0), used->cpu_usec.value_or(0));
    stop(*s);
}

}  // namespace
}  // namespace ptyvisor::backends
