// profile_bench: what a sandbox profile costs on the systemd backend, and whether a fork bomb
// under one slows its neighbours. Prints figures; passes no judgement (docs/sandbox-systemd.md
// keeps them). Run inside the harness:
//   tests/systemd/run.sh build/default/tests/systemd/systemd_profile_bench --gtest_output=none
//   PTYVISOR_HARNESS_LAYOUT=hybrid tests/systemd/run.sh ... (limits enforced)
// (run.sh appends a --gtest_output unless given one; this is no GoogleTest binary.)
#include <fcntl.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/systemd/host_enforcement.h"
#include "backends/systemd/systemd_backend.h"
#include "common/event.h"
#include "common/unique_fd.h"

using namespace ptyvisor;
using namespace ptyvisor::backends;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

namespace {

sd_event* g_event = nullptr;

bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 30s) {
    const auto deadline = SteadyClock::now() + timeout;
    while (!done()) {
        const auto left = deadline - SteadyClock::now();
        if (left <= 0s) return false;
        sd_event_run(g_event, static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(left).count()));
    }
    return true;
}

struct Pty {
    UniqueFd master, slave;
    std::string path, output;
    EventSource source;
    bool open() {
        master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
        if (!master || ::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) return false;
        char name[128];
        if (::ptsname_r(master.get(), name, sizeof name) != 0) return false;
        path = name;
        slave.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
        sd_event_source* s = nullptr;
        if (!slave || sd_event_add_io(g_event, &s, master.get(), EPOLLIN, &Pty::on_readable, this) < 0) return false;
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
};

struct Session {
    Pty pty;
    std::unique_ptr<SessionProcesses> processes;
    bool started = false, failed = false, exited = false;
    std::string why;
};

std::string random_unit() {
    unsigned char bytes[16];
    (void)::getrandom(bytes, sizeof bytes, 0);
    static const char* hex = "0123456789abcdef";
    std::string name = "ptyvisor-";
    for (unsigned char b : bytes) { name += hex[b >> 4]; name += hex[b & 15]; }
    return name + ".service";
}

Account g_account;
UniqueFd g_cwd;
std::unique_ptr<Backend> g_backend;

bool start(Session& s, std::vector<std::string> argv, std::optional<SandboxProfile> profile) {
    if (!s.pty.open()) return false;
    SessionSpec spec;
    spec.unit_name = random_unit();
    spec.argv = std::move(argv);
    spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "HOME=/nonexistent", "USER=" + g_account.name};
    spec.cwd = g_cwd.get();
    struct stat st {};
    ::fstat(spec.cwd, &st);
    spec.cwd_dev = st.st_dev;
    spec.cwd_ino = st.st_ino;
    spec.tty = UniqueFd(::fcntl(s.pty.slave.get(), F_DUPFD_CLOEXEC, 3));
    spec.tty_path = s.pty.path;
    spec.account = g_account;
    spec.profile = std::move(profile);
    s.pty.slave.reset();
    if (const auto resolve = g_backend->resolver(); resolve && !resolve(spec, s.why)) return false;
    SessionEvents ev;
    ev.on_started = [&s](pid_t) { s.started = true; };
    ev.on_start_failed = [&s](std::string why) { s.failed = true; s.why = std::move(why); };
    ev.on_exited = [&s](protocol::ExitStatus) { s.exited = true; };
    s.processes = g_backend->start(std::move(spec), std::move(ev), s.why);
    return s.processes != nullptr;
}

void stop(Session& s) {
    if (!s.processes) return;
    bool done = false;
    s.processes->stop(Clock::now() + 10s, [&](bool, std::string) { done = true; });
    run_until([&] { return done; });
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Milliseconds from start() to on_started (Type=exec: the command has exec'd), `n` times.
std::vector<double> start_times(const std::optional<SandboxProfile>& profile, int n) {
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
        Session s;
        const auto t0 = SteadyClock::now();
        if (!start(s, {"/bin/true"}, profile) || !run_until([&] { return s.started || s.failed; }) || s.failed) {
            std::fprintf(stderr, "start failed: %s\n", s.why.c_str());
            return {};
        }
        ms.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count());
        run_until([&] { return s.exited; }, 5s);
        stop(s);
    }
    return ms;
}

// Echo round trips through `cat` on a session's terminal, in milliseconds.
std::vector<double> echo_latencies(Session& echo, int n) {
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
        const std::string token = "tok" + std::to_string(i) + "\n";
        const size_t before = echo.pty.output.size();
        const auto t0 = SteadyClock::now();
        if (::write(echo.pty.master.get(), token.data(), token.size()) != static_cast<ssize_t>(token.size())) break;
        // The terminal does not echo (stty -echo): what comes back is cat's copy.
        const std::string want = "tok" + std::to_string(i) + "\r\n";
        if (!run_until([&] { return echo.pty.output.find(want, before) != std::string::npos; }, 10s)) break;
        ms.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count());
    }
    return ms;
}

void print(const char* what, const std::vector<double>& v) {
    std::printf("%-44s n=%-3zu p50=%8.3f ms  p90=%8.3f ms  max=%8.3f ms\n", what, v.size(), percentile(v, 0.5),
                percentile(v, 0.9), v.empty() ? 0 : *std::max_element(v.begin(), v.end()));
}

}  // namespace

int main() {
    if (sd_event_new(&g_event) < 0) return 1;
    const passwd* pw = ::getpwnam("ptyvisor-test");
    if (!pw) return 1;
    g_account.name = pw->pw_name;
    g_account.uid = pw->pw_uid;
    g_account.gid = pw->pw_gid;
    ::mkdir("/srv/ptyvisor-bench", 0755);
    if (::chown("/srv/ptyvisor-bench", pw->pw_uid, pw->pw_gid) != 0) return 1;
    g_cwd.reset(::open("/srv/ptyvisor-bench", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    BackendOptions options;
    options.event = g_event;
    std::string why;
    g_backend = make_systemd_backend(options, why);
    if (!g_backend) {
        std::fprintf(stderr, "%s\n", why.c_str());
        return 1;
    }
    std::printf("host: %s\n", systemd::describe(static_cast<SystemdBackend&>(*g_backend).host()).c_str());

    // The strictest profile this host enforces: the limits where it has the controllers.
    SandboxProfile strict;
    strict.name = "strict";
    strict.network = SandboxProfile::Network::None;
    strict.filesystem = SandboxProfile::Filesystem::ReadOnly;
    strict.writable_cwd = true;
    strict.hidden = {"/root", "/srv/ptyvisor-hidden"};
    SandboxProfile limits = strict;
    limits.memory_max = 256ull << 20;
    limits.tasks_max = 64;
    limits.cpu_quota_percent = 100;
    if (g_backend->check_profile(limits, why)) strict = limits;
    else std::printf("limits not enforced here (%s): strictest = namespaces only\n", why.c_str());

    constexpr int kStarts = 40;
    (void)start_times(std::nullopt, 3);  // warm-up
    const auto plain = start_times(std::nullopt, kStarts);
    const auto confined = start_times(strict, kStarts);
    print("start, no profile", plain);
    print("start, strictest profile", confined);
    if (!plain.empty() && !confined.empty())
        std::printf("p50 ratio strictest/none: %.2f\n", percentile(confined, 0.5) / percentile(plain, 0.5));

    // A neighbour's echo latency, idle and while a fork bomb fills its task limit and spins.
    SandboxProfile bomb_profile = strict;
    if (!bomb_profile.tasks_max) {
        std::printf("fork bomb: skipped, no task limit enforced here\n");
    } else {
        Session echo;
        if (!start(echo, {"/bin/sh", "-c", "stty -echo; echo READY; exec cat"}, std::nullopt) ||
            !run_until([&] { return echo.pty.output.find("READY") != std::string::npos; }))
            return 1;
        print("neighbour echo, idle", echo_latencies(echo, 100));
        Session bomb;
        // The classic bash bomb: every copy forks two more until TasksMax refuses, and retries.
        if (!start(bomb, {"/bin/bash", "-c", "b() { b | b & }; b; sleep 1000"}, bomb_profile) ||
            !run_until([&] { return bomb.started; }))
            return 1;
        // Let it reach its limit: its task count is in its usage.
        run_until([&] {
            const auto u = bomb.processes->usage();
            return u && u->tasks_current && *u->tasks_current >= *bomb_profile.tasks_max;
        }, 10s);
        const auto u = bomb.processes->usage();
        std::printf("fork bomb: tasks %llu of %llu, forks refused %llu\n",
                    static_cast<unsigned long long>(u && u->tasks_current ? *u->tasks_current : 0),
                    static_cast<unsigned long long>(*bomb_profile.tasks_max),
                    static_cast<unsigned long long>(u && u->tasks_limit_hits ? *u->tasks_limit_hits : 0));
        print("neighbour echo, during the fork bomb", echo_latencies(echo, 100));
        stop(bomb);
        stop(echo);
    }
    g_backend.reset();
    sd_event_unref(g_event);
    return 0;
}
