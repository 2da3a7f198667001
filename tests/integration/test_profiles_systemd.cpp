// Sandbox profiles enforced by the systemd backend, through the daemon and the CLI (issue 29).
// Runs in integration_on_systemd (the plain harness: pure cgroup v2, where this build machine's
// systemd has no controllers, so memory/task limits must be refused) and in
// integration_profiles_on_systemd_hybrid (tests/systemd/up-hybrid.sh: the host's v1
// controllers, PTYVISOR_EXPECT_LIMITS=1: the limits must be enforced). The direct backend's
// profiles are tested with that backend; here other backends skip (tests/skip-allowlist.txt).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/process.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

namespace fs = std::filesystem;
constexpr Millis kEnd{60000};

bool expect_limits() {
    const char* v = std::getenv("PTYVISOR_EXPECT_LIMITS");
    return v && std::string(v) == "1";
}

std::optional<std::uint64_t> keyed(const std::string& text, const std::string& key) {
    const auto at = text.find(key + " ");
    if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return std::nullopt;
    std::uint64_t v = 0;
    const char* p = text.c_str() + at + key.size() + 1;
    std::from_chars(p, text.c_str() + text.size(), v);
    return v;
}

class ProfilesSystemd : public EndToEnd {
protected:
    void SetUp() override {
        const char* backend = std::getenv("PTYVISOR_TEST_BACKEND");
        if (!backend || std::string(backend) != "systemd")
            GTEST_SKIP() << "the systemd backend's enforcement; integration_on_systemd runs these";
        EndToEnd::SetUp();
    }

    DaemonConfig profiled_config() {
        DaemonConfig cfg = config();
        cfg.allowed_profiles = {"offline", "readonly", "small", "tasks"};
        cfg.tables_toml = R"([profiles.offline]
network = "none"
[profiles.readonly]
filesystem = "read-only"
writable = ["cwd"]
[profiles.small]
memory_max = "64M"
[profiles.tasks]
tasks_max = 32
)";
        return cfg;
    }

    struct Ran {
        int status = -1;
        std::string out, err, transcript;
    };
    Ran ptyvisor(const std::vector<std::string>& args) {
        Ran r;
        auto c = run_cli(args);
        if (!c) return r;
        const auto exit = c->wait_exit(kEnd);
        if (!exit) ADD_FAILURE() << "the CLI did not exit; " << c->transcript();
        r.status = exit ? exit->shell() : -1;
        r.out = c->out();
        r.err = c->err();
        r.transcript = c->transcript();
        return r;
    }
    nlohmann::json listed(const std::string& id) {
        const Ran r = ptyvisor({"ls", "--json"});
        const auto all = nlohmann::json::parse(r.out, nullptr, false);
        if (all.is_array())
            for (const auto& s : all)
                if (s.value("id", "") == id) return s;
        ADD_FAILURE() << id << " is not in " << r.out;
        return nlohmann::json::object();
    }
    std::string detached(const std::string& profile, const std::vector<std::string>& argv) {
        std::vector<std::string> args{"run", "--detach", "--profile", profile, "--"};
        args.insert(args.end(), argv.begin(), argv.end());
        const Ran r = ptyvisor(args);
        EXPECT_EQ(r.status, 0) << r.transcript;
        return r.out.size() >= 32 ? r.out.substr(0, 32) : std::string();
    }
};

// Attack: under network "none" a session reaches a service the host offers on 127.0.0.1.
TEST_F(ProfilesSystemd, NetworkNoneSessionCannotReachALoopbackServerOutside) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    UniqueFd server(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(server.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(server.get(), 8), 0);
    ASSERT_EQ(::getsockname(server.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    const std::string port = std::to_string(ntohs(a.sin_port));
    const std::string script = "if exec 3<>/dev/tcp/127.0.0.1/" + port +
                               "; then echo CONNECT-OK; else echo CONNECT-FAILED; fi; "
                               "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(1); "
                               "socket.create_connection(s.getsockname()); print(\"OWN-LOOPBACK-OK\")'";
    const Ran r = ptyvisor({"run", "--profile", "offline", "--", "bash", "-c", script});
    EXPECT_EQ(r.status, 0) << r.transcript;
    EXPECT_NE(r.out.find("CONNECT-FAILED"), std::string::npos) << r.transcript;
    EXPECT_NE(r.out.find("OWN-LOOPBACK-OK"), std::string::npos) << r.transcript;
    EXPECT_LT(UniqueFd(::accept4(server.get(), nullptr, nullptr, SOCK_CLOEXEC)).get(), 0) << "a connection came in";
    // The control: without the profile the same connect works.
    const Ran open = ptyvisor({"run", "--", "bash", "-c", script});
    EXPECT_NE(open.out.find("CONNECT-OK"), std::string::npos) << open.transcript;
}

// Attack: under the read-only file system a session writes outside its working directory (which
// sits under /tmp here: the private /tmp must not hide it), by a path, a symlink, "..",
// /proc/self/root and a directory fd.
TEST_F(ProfilesSystemd, ReadOnlyFilesystemRefusesWritesOutsideTheWorkingDirectory) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    const fs::path outside = fs::path("/srv") / ("ptyvisor-itest-" + std::to_string(::getpid()));
    fs::create_directories(outside);
    ASSERT_EQ(::chown(outside.c_str(), account_->uid, account_->gid), 0);
    std::ofstream(outside / "file") << "original\n";
    ASSERT_EQ(::chown((outside / "file").c_str(), account_->uid, account_->gid), 0);
    fs::create_symlink(outside / "file", fs::path(work_) / "link");
    const std::string f = (outside / "file").string();
    std::string dotdot = "..";
    for (auto p = fs::path(work_).parent_path(); p != p.root_path(); p = p.parent_path()) dotdot += "/..";
    const std::string script =
        "for w in '" + f + "' link '" + dotdot + f + "' '/proc/self/root" + f + "'; do "
        "  if (echo x > \"$w\") 2>/dev/null; then echo \"WROTE $w\"; else echo \"REFUSED $w\"; fi; done; "
        "exec 7<'" + outside.string() + "'; (echo x > /dev/fd/7/file) 2>/dev/null && echo WROTE-FD || echo REFUSED-FD; "
        "echo in > inside && echo CWD-WRITABLE";
    const Ran r = ptyvisor({"run", "--profile", "readonly", "--", "bash", "-c", script});
    EXPECT_EQ(r.status, 0) << r.transcript;
    EXPECT_EQ(r.out.find("WROTE"), std::string::npos) << r.transcript;
    EXPECT_NE(r.out.find("REFUSED-FD"), std::string::npos) << r.transcript;
    EXPECT_NE(r.out.find("CWD-WRITABLE"), std::string::npos) << r.transcript;
    std::ifstream in(outside / "file");
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), "original\n");
    EXPECT_TRUE(fs::exists(fs::path(work_) / "inside"));
    std::error_code ec;
    fs::remove_all(outside, ec);
}

// `ptyvisor ls --json` usage against the unit's own cgroup files, within 1%.
TEST_F(ProfilesSystemd, LsJsonUsageAgreesWithTheUnitsCgroup) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    // Some CPU and memory, then idle: the figures stop moving while they are compared.
    const std::string id = detached("offline", {"bash", "-c", "x=$(head -c 20000000 /dev/zero | wc -c); echo READY; exec sleep 600"});
    ASSERT_EQ(id.size(), 32u);
    ASSERT_EQ(ptyvisor({"wait", "--timeout", "20", "--for", "text:READY", id}).status, 0);
    const auto s = listed(id);
    const std::string unit = s.value("unit", "");
    ASSERT_FALSE(unit.empty()) << s.dump();
    const auto mount = cgroup2_mount();
    ASSERT_TRUE(mount);
    const std::string cg = "/ptyvisor.slice/" + unit;
    const auto cpu_stat = read_small_file(*mount + cg + "/cpu.stat");
    ASSERT_TRUE(cpu_stat) << *mount + cg;
    const auto cpu = keyed(*cpu_stat, "usage_usec");
    ASSERT_TRUE(cpu);
    const auto& usage = s["usage"];
    ASSERT_TRUE(usage["cpu_usec"].is_number()) << s.dump();
    const double listed_cpu = usage["cpu_usec"].get<double>();
    EXPECT_NEAR(listed_cpu, static_cast<double>(*cpu), static_cast<double>(*cpu) * 0.01) << s.dump();
    std::cout << "[ measured ] cpu_usec ls " << listed_cpu << " cgroup " << *cpu;
    if (const auto peak = read_small_file("/sys/fs/cgroup/memory" + cg + "/memory.max_usage_in_bytes")) {
        ASSERT_TRUE(usage["memory_peak"].is_number()) << s.dump();
        const double want = std::stod(*peak);
        EXPECT_NEAR(usage["memory_peak"].get<double>(), want, want * 0.01) << s.dump();
        std::cout << "; memory_peak ls " << usage["memory_peak"].get<double>() << " cgroup " << want;
    }
    std::cout << "\n";
    EXPECT_EQ(s.value("profile", ""), "offline");
    EXPECT_EQ(ptyvisor({"kill", id}).status, 0);
}

// Attack: a memory hog. Where this host enforces the limit, the session ends with oom-kill and
// its peak; where it does not, START is refused and names the reason.
TEST_F(ProfilesSystemd, MemoryHogEndsWithOomKillOrTheProfileIsRefused) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    const std::vector<std::string> hog{"python3", "-c", "b=[]\nwhile True: b.append(bytearray(1<<20))\n"};
    std::vector<std::string> args{"run", "--profile", "small", "--"};
    args.insert(args.end(), hog.begin(), hog.end());
    const Ran r = ptyvisor(args);
    if (!expect_limits() && r.err.find("profile_unavailable") != std::string::npos) {
        EXPECT_EQ(r.status, 255) << r.transcript;
        EXPECT_NE(r.err.find("memory controller"), std::string::npos) << r.transcript;
        return;
    }
    EXPECT_NE(r.err.find("session ended: oom-kill"), std::string::npos) << r.transcript;
}

// Attack: a fork bomb. Where enforced, it stops at the task limit and the session's usage says
// so; where not, START is refused.
TEST_F(ProfilesSystemd, ForkBombStopsAtTheTaskLimitOrTheProfileIsRefused) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    const std::string bomb =
        "import os,time\nn=0\nwhile True:\n"
        "  try: pid=os.fork()\n"
        "  except OSError: print('FORK-REFUSED', n, flush=True); break\n"
        "  if pid==0: time.sleep(60); os._exit(0)\n"
        "  n+=1\n"
        "  if n>=1000: print('NO-LIMIT', flush=True); break\n";
    const Ran r = ptyvisor({"run", "--profile", "tasks", "--", "python3", "-c", bomb});
    if (!expect_limits() && r.err.find("profile_unavailable") != std::string::npos) {
        EXPECT_EQ(r.status, 255) << r.transcript;
        EXPECT_NE(r.err.find("pids controller"), std::string::npos) << r.transcript;
        return;
    }
    EXPECT_NE(r.out.find("FORK-REFUSED 31"), std::string::npos) << r.transcript;
    EXPECT_EQ(r.out.find("NO-LIMIT"), std::string::npos) << r.transcript;
}

}  // namespace
}  // namespace ptyvisor::itest
