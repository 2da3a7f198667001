// The cost of a sandbox profile at START on the direct backend (issue 29): the time from
// start() to on_started (the command has exec'd), for sessions of `true` with no profile and
// with the strictest one (every limit, network none, read-only file system with a hidden
// path), interleaved. Prints p50/p90 and the ratio of the p50s. Then the echo latency of a
// plain session (`cat` on a raw terminal: the byte comes back only once cat has run) idle
// and during a fork bomb in another session with tasks_max 64. Run as root:
//   build/default/src/backends/direct/direct_profile_bench [rounds]
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/direct/direct_backend.h"
#include "common/event.h"
#include "common/unique_fd.h"

using namespace ptyvisor;
using namespace ptyvisor::backends;
using Micro = std::chrono::duration<double, std::micro>;

namespace {

struct Run {
    double start_us = 0;
    bool ok = false;
};

Run one(Backend& backend, sd_event* event, int cwd, const std::optional<SandboxProfile>& profile, int n) {
    SessionSpec s;
    char unit[80];
    std::snprintf(unit, sizeof unit, "ptyvisor-%08x%024d.service", static_cast<unsigned>(::getpid()), n);
    s.unit_name = unit;
    s.argv = {"/bin/true"};
    s.env = {"PATH=/usr/bin:/bin", "TERM=dumb"};
    s.account = {"root", 0, 0, {}, "/root", "/bin/sh"};
    s.cwd = cwd;
    UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    char name[128];
    if (!master || ::grantpt(master.get()) || ::unlockpt(master.get()) || ::ptsname_r(master.get(), name, sizeof name))
        return {};
    s.tty.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    s.profile = profile;
    bool started = false, failed = false, stopped = false, exited = false;
    SessionEvents ev;
    ev.on_started = [&](pid_t) { started = true; };
    ev.on_start_failed = [&](std::string why) {
        std::fprintf(stderr, "start failed: %s\n", why.c_str());
        failed = true;
    };
    ev.on_exited = [&](protocol::ExitStatus) { exited = true; };
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    auto session = backend.start(std::move(s), std::move(ev), why);
    if (!session) {
        std::fprintf(stderr, "start: %s\n", why.c_str());
        return {};
    }
    while (!started && !failed) sd_event_run(event, 1'000'000);
    Run r{Micro(std::chrono::steady_clock::now() - t0).count(), started};
    while (!exited && !failed) sd_event_run(event, 1'000'000);
    session->stop(Clock::now() + std::chrono::seconds(10), [&](bool, std::string) { stopped = true; });
    while (!stopped) sd_event_run(event, 1'000'000);
    return r;
}

struct Live {
    std::unique_ptr<SessionProcesses> session;
    UniqueFd master;
    bool started = false;
};

// Starts `script` under /bin/sh -c and runs the loop until it has exec'd.
bool start_live(Backend& backend, sd_event* event, int cwd, const std::string& script,
                const std::optional<SandboxProfile>& profile, Live& live) {
    SessionSpec s;
    char unit[80];
    static int n = 0;
    std::snprintf(unit, sizeof unit, "ptyvisor-%08x%024d.service", static_cast<unsigned>(::getpid()), 1'000'000 + n++);
    s.unit_name = unit;
    s.argv = {"/bin/sh", "-c", script};
    s.env = {"PATH=/usr/bin:/bin", "TERM=dumb"};
    s.account = {"root", 0, 0, {}, "/root", "/bin/sh"};
    s.cwd = cwd;
    live.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    char name[128];
    if (!live.master || ::grantpt(live.master.get()) || ::unlockpt(live.master.get()) ||
        ::ptsname_r(live.master.get(), name, sizeof name))
        return false;
    s.tty.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    s.profile = profile;
    SessionEvents ev;
    ev.on_started = [&live](pid_t) { live.started = true; };
    std::string why;
    live.session = backend.start(std::move(s), std::move(ev), why);
    if (!live.session) return false;
    while (!live.started) sd_event_run(event, 1'000'000);
    return true;
}

// Writes one byte to the terminal and waits for it to come back, `count` times; microseconds.
std::vector<double> echo_latency(int master, int count) {
    std::vector<double> out;
    char c = 'x';
    for (int i = 0; i < count; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        if (::write(master, &c, 1) != 1) break;
        pollfd p{master, POLLIN, 0};
        if (::poll(&p, 1, 5000) != 1) break;
        char back[64];
        if (::read(master, back, sizeof back) <= 0) break;
        out.push_back(Micro(std::chrono::steady_clock::now() - t0).count());
    }
    return out;
}

void stop_live(Live& live, sd_event* event) {
    bool stopped = false;
    live.session->stop(Clock::now() + std::chrono::seconds(10), [&](bool, std::string) { stopped = true; });
    while (!stopped) sd_event_run(event, 1'000'000);
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
    char dir[] = "/var/lib/ptyvisor-profile-bench-XXXXXX";
    if (!::mkdtemp(dir)) return 1;
    const std::string base = dir;
    std::filesystem::create_directories(base + "/cwd");
    sd_event* e = nullptr;
    sd_event_new(&e);
    EventLoop event(e);
    BackendOptions options;
    options.event = e;
    options.state_directory = base + "/state";
    std::string why;
    auto backend = make_direct_backend(options, why);
    if (!backend) {
        std::fprintf(stderr, "%s\n", why.c_str());
        return 1;
    }
    SandboxProfile strict;
    strict.name = "strict";
    strict.memory_max = 256ull << 20;
    strict.tasks_max = 64;
    strict.cpu_quota_percent = 100;
    strict.network = SandboxProfile::Network::None;
    strict.filesystem = SandboxProfile::Filesystem::ReadOnly;
    strict.writable_cwd = true;
    strict.hidden = {"/root"};
    if (!backend->check_profile(strict, why)) {
        std::fprintf(stderr, "this host cannot enforce the strict profile: %s\n", why.c_str());
        return 1;
    }
    UniqueFd cwd(::open((base + "/cwd").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    std::vector<double> none, strict_us;
    for (int i = 0; i < rounds; ++i) {
        const auto a = one(*backend, e, cwd.get(), std::nullopt, 2 * i);
        const auto b = one(*backend, e, cwd.get(), strict, 2 * i + 1);
        if (!a.ok || !b.ok) return 1;
        none.push_back(a.start_us);
        strict_us.push_back(b.start_us);
    }
    const double p50n = percentile(none, 0.5), p50s = percentile(strict_us, 0.5);
    std::printf("direct backend, %d rounds, start() to exec:\n", rounds);
    std::printf("  no profile:     p50 %8.0f us  p90 %8.0f us\n", p50n, percentile(none, 0.9));
    std::printf("  strict profile: p50 %8.0f us  p90 %8.0f us\n", p50s, percentile(strict_us, 0.9));
    std::printf("  ratio of p50s: %.2f\n", p50s / p50n);

    // Echo latency of a plain session, idle and while another one forks at its limit.
    Live echo;
    if (!start_live(*backend, e, cwd.get(), "stty raw -echo; echo ready; exec cat", std::nullopt, echo)) return 1;
    char ready[64];
    pollfd p{echo.master.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1 || ::read(echo.master.get(), ready, sizeof ready) <= 0) return 1;
    const auto idle = echo_latency(echo.master.get(), 2000);
    // usage() runs on the event loop (LIST reads it for every session): what one call costs.
    {
        const auto t0 = std::chrono::steady_clock::now();
        std::size_t fields = 0;
        for (int i = 0; i < 1000; ++i)
            if (const auto u = echo.session->usage()) fields += u->cpu_usec.has_value();
        std::printf("usage(): %.1f us per call (1000 calls, %zu with cpu time)\n",
                    Micro(std::chrono::steady_clock::now() - t0).count() / 1000, fields);
    }
    SandboxProfile bomb_profile;
    bomb_profile.name = "bomb";
    bomb_profile.tasks_max = 64;
    Live bomb;
    // A bomb that never burns out: the loop keeps lighting new ones at the limit.
    if (!start_live(*backend, e, cwd.get(), "b() { b | b & }; while :; do b; done 2>/dev/null", bomb_profile, bomb)) return 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {  // until the limit is being hit
        const auto u = bomb.session->usage();
        if (u && u->tasks_limit_hits.value_or(0) > 0) break;
        sd_event_run(e, 10'000);
    }
    const auto during = echo_latency(echo.master.get(), 2000);
    const auto usage = bomb.session->usage();
    std::printf("echo latency of a plain session (cat, raw terminal), 2000 bytes each:\n");
    std::printf("  idle:                       p50 %6.0f us  p99 %6.0f us\n", percentile(idle, 0.5), percentile(idle, 0.99));
    std::printf("  during a fork bomb (tasks_max 64): p50 %6.0f us  p99 %6.0f us  (%zu of 2000 answered)\n",
                percentile(during, 0.5), percentile(during, 0.99), during.size());
    if (usage)
        std::printf("  the bomb's session: tasks_current %llu, forks refused %llu\n",
                    static_cast<unsigned long long>(usage->tasks_current.value_or(0)),
                    static_cast<unsigned long long>(usage->tasks_limit_hits.value_or(0)));
    stop_live(bomb, e);
    stop_live(echo, e);
    bomb.session.reset();  // before the backend they belong to
    echo.session.reset();

    backend.reset();
    std::filesystem::remove_all(base);
    return 0;
}
