// Sandbox profiles enforced by the direct backend (issue 29), each attack a session could try,
// started for real as root (the strongest case: only the sandbox stands in the way, not file
// permissions). Skipped without root, and per test where this host cannot enforce the
// setting (check_profile() says why).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backends/direct/cgroup_limits.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/sandbox_setup.h"
#include "common/event.h"
#include "common/process.h"
#include "common/unique_fd.h"

namespace ptyvisor::backends {
namespace {

using namespace std::chrono_literals;
using protocol::ExitStatus;

struct Observed {
    bool started = false;
    pid_t pid = 0;
    std::string start_error;
    std::optional<ExitStatus> exited;
};

std::string random_hex(std::size_t bytes) {
    std::vector<unsigned char> b(bytes);
    EXPECT_EQ(::getrandom(b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (const unsigned char c : b) {
        out += hex[c >> 4];
        out += hex[c & 15];
    }
    return out;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

class Sandbox : public ::testing::Test {
protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root: sessions switch accounts and make namespaces";
        // Not under /tmp or /var/tmp, which a read-only session sees as its private tmpfs.
        char dir[] = "/var/lib/ptyvisor-sandbox-test-XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        base_ = dir;
        std::filesystem::create_directories(base_ + "/cwd");
        std::filesystem::create_directories(base_ + "/outside");
        std::ofstream(base_ + "/outside/file") << "original\n";
        sd_event* e = nullptr;
        ASSERT_GE(sd_event_new(&e), 0);
        event_.reset(e);
        options_.event = event_.get();
        options_.state_directory = base_ + "/state";
        std::string why;
        backend_ = make_direct_backend(options_, why);
        ASSERT_TRUE(backend_) << why;
    }

    void TearDown() override {
        for (auto& s : sessions_)
            if (s) stop(*s);
        sessions_.clear();
        backend_.reset();
        // The instance directories the sessions lived in (v2 and v1), empty by now.
        if (!base_.empty()) {
            const auto instance = instance_v2();
            if (!instance.empty()) {
                const auto controllers =
                    direct::CgroupControllers::discover(instance, instance.substr(instance.rfind('/') + 1));
                for (const auto& d : controllers.v1_instances()) ::rmdir(d.c_str());
                ::rmdir(instance.c_str());
            }
            std::filesystem::remove_all(base_);
        }
    }

    std::string instance_v2() const {
        const auto mount = cgroup2_mount();
        const auto own = own_cgroup();
        if (!mount || !own || v2_instance_name_.empty()) return {};
        return *mount + (*own == "/" ? std::string() : *own) + "/ptyvisor.sessions/" + v2_instance_name_;
    }

    // Starts /bin/sh -c `script` as root in base/cwd under `profile`.
    SessionProcesses* start(const std::string& script, std::optional<SandboxProfile> profile, Observed& o) {
        SessionSpec s;
        s.unit_name = "ptyvisor-" + random_hex(16) + ".service";
        s.argv = {"/bin/sh", "-c", script};
        s.env = {"PATH=/usr/bin:/bin", "TERM=dumb", "HOME=/root"};
        s.account = {"root", 0, 0, {}, "/root", "/bin/sh"};
        cwd_.reset(::open((base_ + "/cwd").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        s.cwd = cwd_.get();
        master_.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
        char name[128];
        EXPECT_TRUE(master_ && ::grantpt(master_.get()) == 0 && ::unlockpt(master_.get()) == 0 &&
                    ::ptsname_r(master_.get(), name, sizeof name) == 0);
        s.tty.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
        s.tty_path = name;
        s.profile = std::move(profile);
        SessionEvents ev;
        ev.on_started = [&o](pid_t pid) { o.started = true; o.pid = pid; };
        ev.on_start_failed = [&o](std::string why) { o.start_error = why.empty() ? "?" : std::move(why); };
        ev.on_exited = [&o](ExitStatus st) { o.exited = std::move(st); };
        std::string why;
        auto session = backend_->start(std::move(s), std::move(ev), why);
        EXPECT_TRUE(session) << why;
        if (!session) return nullptr;
        EXPECT_TRUE(run_until([&] { return o.started || !o.start_error.empty(); }));
        EXPECT_TRUE(o.started) << o.start_error;
        if (const auto main = PidRef::pin(o.pid)) {
            const auto cg = main->cgroup();
            if (cg && cg->find("/ptyvisor.sessions/") != std::string::npos) {
                const auto inst = cg->substr(0, cg->rfind('/'));
                v2_instance_name_ = inst.substr(inst.rfind('/') + 1);
            }
        }
        sessions_.push_back(std::move(session));
        return sessions_.back().get();
    }

    // Runs `script` to its end; its exit status.
    ExitStatus run(const std::string& script, std::optional<SandboxProfile> profile, SessionProcesses** out = nullptr) {
        Observed& o = observed_.emplace_back();  // outlives the test body, as the session does
        auto* s = start(script, std::move(profile), o);
        if (out) *out = s;
        EXPECT_TRUE(s);
        if (!s) return {};
        EXPECT_TRUE(run_until([&] { return o.exited.has_value(); }, 60s)) << "the session did not end";
        return o.exited.value_or(ExitStatus{});
    }

    bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 20s) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!done()) {
            if (std::chrono::steady_clock::now() >= deadline) return false;
            if (sd_event_run(event_.get(), 10'000) < 0) return false;
        }
        return true;
    }

    bool stop(SessionProcesses& session) {
        std::optional<bool> ok;
        std::string why;
        session.stop(Clock::now() + 10s, [&](bool done, std::string w) {
            ok = done;
            why = std::move(w);
        });
        EXPECT_TRUE(run_until([&] { return ok.has_value(); }));
        EXPECT_TRUE(ok.value_or(false)) << why;
        return ok.value_or(false);
    }

    // Skips the test where this host cannot enforce `p` (the backend must say so, never run it).
    bool enforceable(const SandboxProfile& p) {
        std::string why;
        if (backend_->check_profile(p, why)) return true;
        ADD_FAILURE() << "this host (hybrid cgroups, Landlock ABI 7) should enforce \"" << p.name << "\": " << why;
        return false;
    }

    std::string base_, v2_instance_name_;
    EventLoop event_;
    BackendOptions options_;
    std::unique_ptr<Backend> backend_;
    UniqueFd cwd_, master_;
    // Declared before sessions_: the sessions' callbacks write to these until TearDown.
    std::deque<Observed> observed_;
    std::vector<std::unique_ptr<SessionProcesses>> sessions_;
};

// A fork bomb stops at tasks_max: the kernel refuses its forks, the session's usage counts
// the refusals, and the rest of the machine can still fork.
TEST_F(Sandbox, AForkBombStopsAtTasksMax) {
    SandboxProfile p;
    p.name = "bomb";
    p.tasks_max = 16;
    if (!enforceable(p)) return;
    Observed& o = observed_.emplace_back();  // outlives the test body, as the session does
    auto* s = start("i=0; while [ $i -lt 200 ]; do sleep 600 & i=$((i+1)); done; wait", p, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until([&] {
        const auto u = s->usage();
        return u && u->tasks_limit_hits.value_or(0) > 0;
    })) << "the session never hit its task limit";
    const auto u = s->usage();
    ASSERT_TRUE(u && u->tasks_current);
    EXPECT_LE(*u->tasks_current, 16u);
    std::printf("fork bomb: tasks_current %llu, forks refused %llu\n",
                static_cast<unsigned long long>(*u->tasks_current),
                static_cast<unsigned long long>(u->tasks_limit_hits.value_or(0)));
    // The machine stays usable: this process still forks and execs.
    const pid_t child = ::fork();
    if (child == 0) {
        ::execl("/bin/true", "true", nullptr);
        ::_exit(127);
    }
    ASSERT_GT(child, 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// A memory hog above memory_max is OOM-killed inside its own session: the session's count
// says 1, its peak is at the limit, and nothing outside (this test process) is touched.
TEST_F(Sandbox, AMemoryHogIsOomKilledInsideItsSessionOnly) {
    SandboxProfile p;
    p.name = "hog";
    p.memory_max = 64ull << 20;
    if (!enforceable(p)) return;
    SessionProcesses* s = nullptr;
    const auto st = run("exec dd if=/dev/zero of=/dev/null bs=512M count=1", p, &s);
    ASSERT_TRUE(s);
    EXPECT_EQ(st.kind, ExitStatus::Kind::Signaled);
    EXPECT_EQ(st.signal, SIGKILL);
    const auto u = s->usage();
    ASSERT_TRUE(u);
    EXPECT_EQ(u->oom_kills, 1u);
    ASSERT_TRUE(u->memory_peak);
    std::printf("memory hog: oom_kills %llu, peak %llu bytes (limit %llu)\n",
                static_cast<unsigned long long>(u->oom_kills.value_or(0)),
                static_cast<unsigned long long>(*u->memory_peak), 64ull << 20);
    EXPECT_LE(*u->memory_peak, 64ull << 20);
    EXPECT_GE(*u->memory_peak, 48ull << 20) << "the peak should be near the limit";
}

std::string python(const std::string& code) { return "exec python3 -c '" + code + "'"; }

// Exits 0 when the host's listener on `port` refuses (loopback up, nobody there: a namespace
// of its own) and the session's own loopback carries a byte; 3 when it reached the host.
std::string network_probe(int port) {
    return python(
        "import socket, sys\n"
        "try:\n"
        "    socket.create_connection((\"127.0.0.1\", " + std::to_string(port) + "), timeout=5)\n"
        "    sys.exit(3)\n"
        "except ConnectionRefusedError:\n"
        "    pass\n"
        "s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen()\n"
        "c = socket.create_connection(s.getsockname(), timeout=5)\n"
        "a, _ = s.accept(); c.sendall(b\"x\")\n"
        "sys.exit(0 if a.recv(1) == b\"x\" else 4)\n");
}

// network = none: a server the test runs on the host's 127.0.0.1 is out of reach, the
// session's own loopback works. Without the profile the same probe reaches the host.
TEST_F(Sandbox, UnderNetworkNoneAHostListenerOnLoopbackIsOutOfReach) {
    if (::access("/usr/bin/python3", X_OK) < 0) GTEST_SKIP() << "needs /usr/bin/python3 for the probe";
    SandboxProfile p;
    p.name = "offline";
    p.network = SandboxProfile::Network::None;
    if (!enforceable(p)) return;
    UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(listener.get(), 8), 0);
    ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
    const int port = ntohs(addr.sin_port);

    const auto confined = run(network_probe(port), p);
    EXPECT_EQ(confined.kind, ExitStatus::Kind::Exited);
    EXPECT_EQ(confined.code, 0) << "3: reached the host's listener; 1: loopback down or another error";
    EXPECT_LT(::accept(listener.get(), nullptr, nullptr), 0) << "a connection from the session arrived";

    const auto control = run(network_probe(port), std::nullopt);
    EXPECT_EQ(control.code, 3) << "without the profile the probe should reach the host";
}

// Every route out of the working directory, one line of results each ("NAME ok" or
// "NAME refused: <error>"); then one write inside it.
std::string write_routes(const std::string& base) {
    const std::string out = base + "/outside";
    return "try() { if sh -c \"$2\" 2>./err; then echo \"$1 ok\"; else echo \"$1 refused: $(cat ./err)\"; fi; }\n"
           "exec 4>./results\n"
           "try path 'echo x > " + out + "/new' >&4\n"
           "try existing 'echo x >> " + out + "/file' >&4\n"
           "try symlink 'echo x > ./link' >&4\n"
           "try dotdot 'echo x > ../outside/new' >&4\n"
           "try hardlink 'ln " + out + "/file ./hard && echo x >> ./hard' >&4\n"
           "try proc-root 'echo x > /proc/self/root" + out + "/new' >&4\n"
           "try dev-fd 'exec 3<" + out + "; echo x > /dev/fd/3/new' >&4\n"
           "try remove 'rm " + out + "/file' >&4\n"
           "try etc 'touch /etc/ptyvisor-sandbox-test' >&4\n"
           // A FIFO outside: a read-only mount does not stop writing to one; Landlock must.
           "try fifo 'exec 3<>" + out + "/fifo; echo x >&3' >&4\n"
           "try devnull 'echo x > /dev/null' >&4\n"
           "try inside 'echo inside > ./inside' >&4\n"
           "try tmp 'echo t > /tmp/ptyvisor-sandbox-test-" + random_hex(4) + "' >&4\n";
}

std::map<std::string, std::string> results(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const auto sp = line.find(' ');
        if (sp != std::string::npos) out[line.substr(0, sp)] = line.substr(sp + 1);
    }
    return out;
}

// filesystem = read-only with "cwd" writable: writing outside the working directory fails
// with EROFS or EACCES by every route, inside it works, /tmp is the session's own.
TEST_F(Sandbox, UnderReadOnlyEveryRouteOutOfTheCwdIsRefused) {
    SandboxProfile p;
    p.name = "ro";
    p.filesystem = SandboxProfile::Filesystem::ReadOnly;
    p.writable_cwd = true;
    if (!enforceable(p)) return;
    std::filesystem::create_symlink(base_ + "/outside/file", base_ + "/cwd/link");
    ASSERT_EQ(::mkfifo((base_ + "/outside/fifo").c_str(), 0666), 0);

    const auto st = run(write_routes(base_), p);
    EXPECT_EQ(st.kind, ExitStatus::Kind::Exited);
    const auto text = slurp(base_ + "/cwd/results");
    std::printf("routes under read-only:\n%s", text.c_str());  // docs/sandbox.md quotes them
    auto r = results(text);
    for (const char* route : {"path", "existing", "symlink", "dotdot", "hardlink", "proc-root", "dev-fd", "remove", "etc"}) {
        ASSERT_TRUE(r.contains(route)) << route;
        const auto& v = r[route];
        EXPECT_TRUE(v.find("Read-only file system") != std::string::npos || v.find("Permission denied") != std::string::npos ||
                    v.find("Invalid cross-device link") != std::string::npos)
            << route << ": " << v;
        EXPECT_EQ(v.rfind("refused", 0), 0u) << route << ": " << v;
    }
    // Only Landlock stands in the way of this one.
    EXPECT_NE(r["fifo"].find("Permission denied"), std::string::npos) << r["fifo"];
    EXPECT_EQ(r["devnull"], "ok");
    EXPECT_EQ(r["inside"], "ok");
    EXPECT_EQ(r["tmp"], "ok");
    EXPECT_EQ(slurp(base_ + "/cwd/inside"), "inside\n");
    EXPECT_EQ(slurp(base_ + "/outside/file"), "original\n");
    EXPECT_FALSE(std::filesystem::exists(base_ + "/outside/new"));
    EXPECT_FALSE(std::filesystem::exists("/etc/ptyvisor-sandbox-test"));

    // The control: the same routes without the profile get through (the test can fail).
    std::filesystem::remove(base_ + "/cwd/results");
    run(write_routes(base_), std::nullopt);
    r = results(slurp(base_ + "/cwd/results"));
    EXPECT_EQ(r["path"], "ok");
    EXPECT_EQ(r["dotdot"], "ok");
    EXPECT_EQ(r["fifo"], "ok");
    ::unlink("/etc/ptyvisor-sandbox-test");
}

// Without "cwd" in writable the working directory is read-only too; `writable` paths are not.
TEST_F(Sandbox, UnderReadOnlyOnlyListedPathsAreWritable) {
    SandboxProfile p;
    p.name = "ro-listed";
    p.filesystem = SandboxProfile::Filesystem::ReadOnly;
    p.writable = {base_ + "/outside"};
    if (!enforceable(p)) return;
    const auto st = run("echo x > ./in 2>/dev/null && exit 5; echo y > " + base_ + "/outside/new || exit 6; exit 0", p);
    EXPECT_EQ(st.code, 0) << "5: the cwd was writable; 6: the writable path was not";
    EXPECT_FALSE(std::filesystem::exists(base_ + "/cwd/in"));
    EXPECT_EQ(slurp(base_ + "/outside/new"), "y\n");
}

// hidden: a directory and a file the session cannot read, even as root.
TEST_F(Sandbox, HiddenPathsCannotBeRead) {
    SandboxProfile p;
    p.name = "hidden";
    std::filesystem::create_directories(base_ + "/secret");
    std::ofstream(base_ + "/secret/key") << "s3cret\n";
    std::ofstream(base_ + "/token") << "t0ken\n";
    p.hidden = {base_ + "/secret", base_ + "/token"};
    if (!enforceable(p)) return;
    const auto st = run("cat " + base_ + "/secret/key 2>/dev/null && exit 5; [ -s " + base_ +
                            "/token ] && exit 6; echo hidden > " + base_ + "/token 2>/dev/null; exit 0",
                        p);
    EXPECT_EQ(st.code, 0) << "5: the directory's file was readable; 6: the file had content";
    EXPECT_EQ(slurp(base_ + "/token"), "t0ken\n");
}

// The figures usage() reports are the cgroup's own files, on this host's layout.
TEST_F(Sandbox, UsageAgreesWithTheCgroupsOwnFiles) {
    Observed& o = observed_.emplace_back();  // outlives the test body, as the session does
    auto* s = start("exec sleep 600", std::nullopt, o);
    ASSERT_TRUE(s);
    const auto u = s->usage();
    ASSERT_TRUE(u) << "accounting is on for a session without a profile";
    const auto text = read_small_file("/proc/" + std::to_string(o.pid) + "/cgroup").value_or("");
    auto v1 = [&](const std::string& ctl) -> std::string {
        std::istringstream in(text);
        std::string line;
        while (std::getline(in, line)) {
            const auto a = line.find(':'), b = line.find(':', a + 1);
            if (line.substr(a + 1, b - a - 1) == ctl) return "/sys/fs/cgroup/" + ctl + line.substr(b + 1);
        }
        return {};
    };
    const auto number = [](const std::string& path) { return std::stoull(slurp(path)); };
    const std::string memory = v1("memory"), pids = v1("pids"), cpuacct = v1("cpuacct");
    if (memory.find("ptyvisor.sessions") == std::string::npos)
        GTEST_SKIP() << "checked on a hybrid host only (this one is not): pure v2 is not tested here";
    EXPECT_EQ(u->memory_peak, number(memory + "/memory.max_usage_in_bytes"));
    EXPECT_EQ(u->tasks_current, number(pids + "/pids.current"));
    EXPECT_EQ(u->tasks_current, 1u);
    // The session may still be running: usage() read between two reads of the file lies
    // between them (a fixed 1% could not hold for a process that starts as it is read).
    const auto cpu_before = number(cpuacct + "/cpuacct.usage") / 1000;
    const auto between = s->usage();
    const auto cpu_after = number(cpuacct + "/cpuacct.usage") / 1000;
    ASSERT_TRUE(u->cpu_usec);
    ASSERT_TRUE(between && between->cpu_usec);
    EXPECT_GE(*between->cpu_usec, cpu_before);
    EXPECT_LE(*between->cpu_usec, cpu_after);
    EXPECT_EQ(u->oom_kills, 0u);
    EXPECT_FALSE(u->tasks_peak) << "v1 keeps no task peak: none may be invented";

    // After the end, until stop(), and after stop() the last figures.
    ::kill(o.pid, SIGTERM);
    ASSERT_TRUE(run_until([&] { return o.exited.has_value(); }));
    ASSERT_TRUE(s->usage() && s->usage()->cpu_usec);
    ASSERT_TRUE(stop(*s));
    const auto after = s->usage();
    ASSERT_TRUE(after && after->cpu_usec && after->memory_peak);
    EXPECT_FALSE(std::filesystem::exists(memory)) << "stop() leaves the v1 directory";
    sessions_.clear();
}

// The profile's limits are in the session's own cgroup files before its command runs.
TEST_F(Sandbox, LimitsAreInTheSessionsCgroupFiles) {
    SandboxProfile p;
    p.name = "limits";
    p.memory_max = 128ull << 20;
    p.tasks_max = 32;
    p.cpu_quota_percent = 20;
    if (!enforceable(p)) return;
    Observed& o = observed_.emplace_back();  // outlives the test body, as the session does
    auto* s = start("exec sleep 600", p, o);
    ASSERT_TRUE(s);
    const auto text = read_small_file("/proc/" + std::to_string(o.pid) + "/cgroup").value_or("");
    auto v1 = [&](const std::string& ctl) -> std::string {
        std::istringstream in(text);
        std::string line;
        while (std::getline(in, line)) {
            const auto a = line.find(':'), b = line.find(':', a + 1);
            if (line.substr(a + 1, b - a - 1) == ctl) return "/sys/fs/cgroup/" + ctl + line.substr(b + 1);
        }
        return {};
    };
    const std::string memory = v1("memory"), pids = v1("pids"), cpu = v1("cpu");
    if (memory.find("ptyvisor.sessions") == std::string::npos)
        GTEST_SKIP() << "checked on a hybrid host only (this one is not): pure v2 is not tested here";
    EXPECT_EQ(slurp(memory + "/memory.limit_in_bytes"), std::to_string(128ull << 20) + "\n");
    if (std::filesystem::exists(memory + "/memory.memsw.limit_in_bytes")) {
        EXPECT_EQ(slurp(memory + "/memory.memsw.limit_in_bytes"), std::to_string(128ull << 20) + "\n");
    }
    EXPECT_EQ(slurp(pids + "/pids.max"), "32\n");
    EXPECT_EQ(slurp(cpu + "/cpu.cfs_period_us"), "100000\n");
    EXPECT_EQ(slurp(cpu + "/cpu.cfs_quota_us"), "20000\n");
}

// What the host cannot do is refused with the reason, never run unconfined.
TEST(SandboxCheck, CheckProfileRefusesWhatTheHostCannotDo) {
    const direct::CgroupControllers none;
    SandboxProfile p;
    p.memory_max = 1 << 20;
    std::string why;
    EXPECT_FALSE(none.check(p, why));
    EXPECT_EQ(why, "memory_max needs the memory controller: neither cgroup v2's memory nor a v1 memory hierarchy is available");
    p = {};
    p.tasks_max = 4;
    EXPECT_FALSE(none.check(p, why));
    EXPECT_NE(why.find("pids controller"), std::string::npos);

    const direct::SandboxSupport nothing;
    p = {};
    p.network = SandboxProfile::Network::None;
    EXPECT_FALSE(nothing.check(p, why));
    EXPECT_NE(why.find("network namespace"), std::string::npos);
    p = {};
    p.filesystem = SandboxProfile::Filesystem::ReadOnly;
    direct::SandboxSupport no_landlock{true, true, true, true, 0};
    EXPECT_FALSE(no_landlock.check(p, why));
    EXPECT_NE(why.find("Landlock"), std::string::npos);
    direct::SandboxSupport old_kernel{true, true, false, true, 7};
    EXPECT_FALSE(old_kernel.check(p, why));
    EXPECT_NE(why.find("mount_setattr"), std::string::npos);
    p.writable = {"relative/path"};
    const direct::SandboxSupport all{true, true, true, true, 7};
    EXPECT_FALSE(all.check(p, why));
    EXPECT_NE(why.find("absolute"), std::string::npos);
}

// The pure v2 file names and formats, on plain files: this host has no pure v2 layout, so
// this is all of the v2 path that is tested here (docs/sandbox.md).
TEST(SandboxCheck, PureV2LimitsAndUsageUseTheV2Files) {
    char dir[] = "/tmp/ptyvisor-fake-v2-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    const std::string session = std::string(dir) + "/ptyvisor-x.service";
    std::filesystem::create_directories(session);
    const std::map<std::string, std::string> files = {
        // Written by create(): empty, as plain files are not replaced by a write the way
        // cgroupfs files are.
        {"memory.max", ""}, {"memory.swap.max", ""}, {"pids.max", ""}, {"cpu.max", ""},
        {"cpu.stat", "usage_usec 4242\nuser_usec 4000\nsystem_usec 242\n"}, {"memory.current", "1000\n"},
        {"memory.peak", "2000\n"}, {"memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"},
        {"pids.current", "3\n"}, {"pids.peak", "9\n"}, {"pids.events", "max 5\n"},
        {"io.stat", "8:0 rbytes=100 wbytes=200 rios=1 wios=2 dbytes=0 dios=0\n"}};
    for (const auto& [name, text] : files) std::ofstream(session + "/" + name) << text;
    const auto c = direct::CgroupControllers::pure_v2(dir, true, true);
    SandboxProfile p;
    p.memory_max = 64ull << 20;
    p.tasks_max = 32;
    p.cpu_quota_percent = 150;
    std::string why;
    ASSERT_TRUE(c.check(p, why)) << why;
    direct::SessionCgroups dirs;
    dirs.v2 = session;
    ASSERT_EQ(c.create("ptyvisor-x.service", &p, dirs, why), 0) << why;
    EXPECT_TRUE(dirs.v1.empty());
    EXPECT_EQ(slurp(session + "/memory.max"), std::to_string(64ull << 20));
    EXPECT_EQ(slurp(session + "/memory.swap.max"), "0");
    EXPECT_EQ(slurp(session + "/pids.max"), "32");
    EXPECT_EQ(slurp(session + "/cpu.max"), "150000 100000");
    const auto u = direct::read_usage(dirs);
    EXPECT_EQ(u.cpu_usec, 4242u);
    EXPECT_EQ(u.memory_current, 1000u);
    EXPECT_EQ(u.memory_peak, 2000u);
    EXPECT_EQ(u.oom_kills, 1u);
    EXPECT_EQ(u.tasks_current, 3u);
    EXPECT_EQ(u.tasks_peak, 9u);
    EXPECT_EQ(u.tasks_limit_hits, 5u);
    EXPECT_EQ(u.io_read_bytes, 100u);
    EXPECT_EQ(u.io_write_bytes, 200u);
    std::filesystem::remove_all(dir);
}

TEST(SandboxCheck, CgroupFilesAreParsed) {
    EXPECT_EQ(direct::keyed_value("usage_usec 1234\nuser_usec 1000\n", "usage_usec"), 1234u);
    EXPECT_EQ(direct::keyed_value("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", "oom_kill"), 2u);
    EXPECT_EQ(direct::keyed_value("max 0\n", "oom_kill"), std::nullopt);
    EXPECT_EQ(direct::io_stat_bytes("8:0 rbytes=10 wbytes=20 rios=1\n259:0 rbytes=5 wbytes=1\n"),
              std::make_pair(std::uint64_t{15}, std::uint64_t{21}));
}

}  // namespace
}  // namespace ptyvisor::backends
