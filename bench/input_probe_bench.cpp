// What one probe_input_wait costs (src/server/input_probe.h), per probe: median and p99 in µs,
// for a session whose foreground group is
//   - a shell at its prompt (bash -i: one process in pselect6 on the terminal);
//   - ten sleeping processes (and their shell, in wait4): Busy at the first sleeper found;
//   - ten processes reading the terminal: every task examined, the longest Waiting answer.
// Each twice: /0 without a cgroup (every process on the host is read: host_processes says how
// many there were), /1 with the session in a cgroup of its own, as ptyvisord runs sessions.
//
//   build/default/bench/input_probe_bench
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/unique_fd.h"
#include "server/input_probe.h"

namespace {

using ptyvisor::UniqueFd;
using namespace ptyvisor::server;
using Clock = std::chrono::steady_clock;

// A program as the session leader of a fresh terminal, as ptyvisord runs a session.
class Session {
public:
    explicit Session(const std::vector<std::string>& argv, bool own_cgroup) {
        if (own_cgroup && !make_cgroup()) return;
        master_.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
        if (!master_ || ::unlockpt(master_.get()) != 0) return;
        UniqueFd peer(::ioctl(master_.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY));
        if (!peer) return;
        terminal_ = identify_terminal(master_.get());
        std::vector<char*> args;
        for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
        args.push_back(nullptr);
        pid_ = ::fork();
        if (pid_ == 0) {
            if (cgroup_procs_ && ::write(cgroup_procs_.get(), "0", 1) != 1) ::_exit(126);
            ::setsid();
            ::ioctl(peer.get(), TIOCSCTTY, 0);
            ::dup2(peer.get(), 0);
            ::dup2(peer.get(), 1);
            ::dup2(peer.get(), 2);
            ::execvp(args[0], args.data());
            ::_exit(127);
        }
    }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    ~Session() {
        if (pid_ > 0) {
            if (const auto group = foreground_group(master_.get())) ::kill(-*group, SIGKILL);
            ::kill(-pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (!cgroup_path_.empty()) {
            if (const UniqueFd kill(::open((cgroup_path_ + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC)); kill)
                (void)!::write(kill.get(), "1", 1);
            // The killed processes are reaped by init, later; rmdir waits for them.
            for (int attempt = 0; attempt < 100 && ::rmdir(cgroup_path_.c_str()) != 0 && errno == EBUSY; ++attempt)
                ::usleep(10000);
        }
    }

    [[nodiscard]] bool started() const { return pid_ > 0 && terminal_.known; }

    InputWait probe() const { return probe_input_wait(master_.get(), terminal_, cgroup_.get()); }

    // Probes (reading output in between) until the output holds `marker` and the answer is
    // `expected`, at most 10 s.
    bool settle(InputWait::State expected, const std::string& marker) {
        const auto deadline = Clock::now() + std::chrono::seconds(10);
        while (Clock::now() < deadline) {
            if (output_.find(marker) != std::string::npos && probe().state == expected) return true;
            pollfd entry{master_.get(), POLLIN, 0};
            if (::poll(&entry, 1, 20) > 0) {
                char buffer[4096];
                for (ssize_t n; (n = ::read(master_.get(), buffer, sizeof buffer)) > 0;)
                    output_.append(buffer, static_cast<std::size_t>(n));
            }
        }
        return false;
    }

private:
    bool make_cgroup() {
        const std::optional<std::string> mount = ptyvisor::cgroup2_mount();
        const std::optional<std::string> own = ptyvisor::own_cgroup();
        if (!mount || !own) return false;
        std::string path = *mount + *own + "/input_probe_bench.XXXXXX";
        if (::mkdtemp(path.data()) == nullptr) return false;
        cgroup_path_ = path;
        cgroup_.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        cgroup_procs_.reset(::open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
        return cgroup_ && cgroup_procs_;
    }

    std::string cgroup_path_;
    UniqueFd cgroup_;
    UniqueFd cgroup_procs_;
    UniqueFd master_;
    TerminalIdentity terminal_;
    pid_t pid_ = -1;
    std::string output_;
};

double host_processes() {
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return 0;
    double count = 0;
    while (const dirent* entry = ::readdir(proc))
        if (entry->d_name[0] >= '1' && entry->d_name[0] <= '9') ++count;
    ::closedir(proc);
    return count;
}

void measure(benchmark::State& state, const std::vector<std::string>& argv, InputWait::State expected,
             const std::string& marker = "") {
    Session session(argv, state.range(0) != 0);
    if (!session.started()) {
        state.SkipWithError("no session (with a cgroup of its own: is cgroup v2 writable?)");
        return;
    }
    if (!session.settle(expected, marker)) {
        state.SkipWithError("the session never reached the expected answer");
        return;
    }
    std::vector<double> micros;
    micros.reserve(static_cast<std::size_t>(state.max_iterations));
    bool consistent = true;
    for (auto _ : state) {
        const auto start = Clock::now();
        const InputWait answer = session.probe();
        const auto stop = Clock::now();
        benchmark::DoNotOptimize(answer);
        consistent = consistent && answer.state == expected;
        micros.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    }
    if (!consistent) state.SkipWithError("the answer changed while measuring");
    std::sort(micros.begin(), micros.end());
    state.counters["median_us"] = micros[micros.size() / 2];
    state.counters["p99_us"] = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
    state.counters["host_processes"] = host_processes();
}

void BM_ShellAtPrompt(benchmark::State& state) {
    measure(state, {"bash", "--norc", "--noprofile", "-i"}, InputWait::State::Waiting);
}

void BM_TenSleepers(benchmark::State& state) {
    measure(state, {"sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1000 & done; echo forked; wait"},
            InputWait::State::Busy, "forked");
}

void BM_TenTerminalReaders(benchmark::State& state) {
    measure(state,
            {"python3", "-c",
             "import os\n"
             "for _ in range(9):\n"
             "    if os.fork() == 0: break\n"
             "os.read(0, 1)"},
            InputWait::State::Waiting);
}

BENCHMARK(BM_ShellAtPrompt)->Arg(0)->Arg(1)->Iterations(2000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TenSleepers)->Arg(0)->Arg(1)->Iterations(2000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TenTerminalReaders)->Arg(0)->Arg(1)->Iterations(2000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
