// The cost of a sandbox profile at START on the direct backend (issue 29): the time from
// start() to on_started (the command has exec'd), for sessions of `true` with no profile and
// with the strictest one (every limit, network none, read-only file system with a hidden
// path), interleaved. Prints p50/p90 and the ratio of the p50s. Run as root:
//   build/default/src/backends/direct/direct_profile_bench [rounds]
#include <fcntl.h>
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
    backend.reset();
    std::filesystem::remove_all(base);
    return 0;
}
