// Scenario 4, crash safety.
//
// The daemon is SIGKILLed at random points (seeded; PTYVISOR_TEST_SEED replays) during each
// of four phases:
//   startup    a daemon with live sessions is killed, then the next one is killed during its
//              own start-up (while it may be cleaning up the first one's orphans);
//   handshake  connections in every state of the handshake (START complete, half sent,
//              none yet);
//   relay      a session streaming output to a client that is reading;
//   cleanup    right after STOP, while the session is being stopped.
// After each kill a new daemon is started. By READY=1 it must have cleaned up everything:
// no session cgroup left under ptyvisor.sessions and no session process alive (direct
// backend), no `ptyvisor-*` unit left (systemd backend, inside the harness), no session
// record left in <state_directory>/sessions (either backend: the direct one writes them, the
// systemd one must not), and the socket must work (a session runs). What is left is counted
// and asserted after every restart, and the printed totals are those counts. Every session process the test saw is watched through a pidfd,
// so a recycled PID can never pass for a survivor.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "common/linux.h"
#include "rel_support.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

// A random pause before the kill: where the kill lands is the randomised variable under
// test, not a synchronisation.
void pause_us(std::uint64_t us) {
    timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)};
    while (::nanosleep(&ts, &ts) != 0) {
    }
}

enum class Phase { Startup, Handshake, Relay, Cleanup };
const char* name_of(Phase p) {
    switch (p) {
        case Phase::Startup: return "startup";
        case Phase::Handshake: return "handshake";
        case Phase::Relay: return "relay";
        case Phase::Cleanup: return "cleanup";
    }
    return "?";
}

class CrashSafety : public EndToEnd {
protected:
    bool systemd() const { return backend() == "systemd"; }

    // What a crashed daemon may have left: session cgroups (direct) or units (systemd).
    std::vector<std::string> leftovers() {
        if (systemd()) {
            std::string out;
            rel::run_captured({"systemctl", "list-units", "--all", "--plain", "--no-legend", "--no-pager",
                               "ptyvisor-*"},
                              Millis(30000), out);
            std::vector<std::string> units;
            std::size_t at = 0;
            while (at < out.size()) {
                const auto end = out.find('\n', at);
                std::string line = out.substr(at, end == std::string::npos ? std::string::npos : end - at);
                if (line.find("ptyvisor-") != std::string::npos) units.push_back(line);
                if (end == std::string::npos) break;
                at = end + 1;
            }
            return units;
        }
        // ptyvisor.sessions/<instance>/<session>: an instance directory may stay (it is the
        // daemon's, empty); a session directory or any process under it may not.
        std::vector<std::string> found;
        for (const auto& level1 : rel::subdirectories(rel::direct_sessions_dir())) {
            const auto level2 = rel::subdirectories(level1);
            if (level1.find("/instance-") == std::string::npos) found.push_back(level1);
            found.insert(found.end(), level2.begin(), level2.end());
        }
        for (const pid_t p : rel::cgroup_tree_pids(rel::direct_sessions_dir()))
            found.push_back("pid " + std::to_string(p));
        return found;
    }

    // The session records a crashed daemon may have left in <state_directory>/sessions
    // (src/backends/direct/session_records.h): every entry counts, valid or not, temporary
    // files included, since the restart must have consumed or deleted them all.
    std::vector<std::string> records() const {
        std::vector<std::string> found;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(state_ + "/sessions", ec))
            found.push_back(e.path().string());
        return found;
    }

    // A daemon started without waiting for READY, to be killed during its start-up.
    struct Raw {
        pid_t pid = -1;
        UniqueFd pidfd;
    };
    Raw spawn_unready(const DaemonConfig& cfg, int serial) {
        const std::string conf = *dir_ / ("crash-" + std::to_string(serial) + ".toml");
        const std::string log = *dir_ / ("crash-" + std::to_string(serial) + ".log");
        write_text_file(conf, cfg.to_toml());
        CStrings argv(std::vector<std::string>{daemon_binary(), "--config", conf, "--backend", cfg.backend});
        UniqueFd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        Raw r;
        r.pid = ::fork();
        if (r.pid == 0) {
            ::dup2(devnull.get(), 0);
            ::dup2(out.get(), 1);
            ::dup2(out.get(), 2);
            ::unsetenv("NOTIFY_SOCKET");
            ::execv(argv.get()[0], argv.get());
            ::_exit(127);
        }
        r.pidfd = open_pidfd(r.pid);
        return r;
    }
    static void kill_and_reap(Raw& r) {
        ptyvisor::pidfd_send_signal(r.pidfd.get(), SIGKILL);
        siginfo_t info{};
        ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(r.pidfd.get()), &info, WEXITED);
    }

    // The session processes the test has seen, watched through pidfds.
    std::vector<std::pair<pid_t, UniqueFd>> watched_;
    void watch(pid_t pid) {
        UniqueFd fd = open_pidfd(pid);
        if (fd) watched_.emplace_back(pid, std::move(fd));
    }
    // A session whose processes ignore SIGHUP (so that only a real kill ends them); their
    // PIDs are read from its output and watched.
    std::unique_ptr<RawClient> sleeper_session(const std::vector<std::string>& argv) {
        auto c = connect_as_account();
        if (!c || !start_session(*c, argv)) return nullptr;
        const auto bg = read_number(*c, "bg=");
        const auto main = read_number(*c, "pid=");
        if (bg) watch(*bg);
        if (main) watch(*main);
        return c;
    }
};

TEST_F(CrashSafety, SigkillAtRandomPointsLeavesNothingBehind) {
    // The direct backend needs no harness, except in the run that exists to test systemd.
    PTYVISOR_NEEDS_SYSTEMD_HARNESS(systemd() ? ::access("/run/systemd/system", F_OK) == 0
                                             : !rel::systemd_required());
    if (!systemd() && rel::direct_sessions_dir().empty()) GTEST_SKIP() << "no cgroup2 here";
    DaemonConfig cfg = config();
    cfg.admissions_per_minute = 1000000;
    const std::uint64_t seed = rel::seed(4242);
    rel::Rng rng(seed);
    const std::size_t iterations = scaled(10, 100);
    std::map<std::string, long> orphans_made;  // phase -> leftovers seen right after the kill
    std::map<std::string, long> records_made;  // phase -> session records right after the kill
    std::map<std::string, long> kills;
    std::size_t left_total = 0, records_left_total = 0;  // summed over every restart
    // What the dead daemon left, right after the kill: what the restart must clean up.
    const auto count_after_kill = [&](const char* phase) {
        orphans_made[phase] += static_cast<long>(leftovers().size());
        records_made[phase] += static_cast<long>(records().size());
    };
    ASSERT_TRUE(records().empty()) << "records before the test: " << records().front();
    ASSERT_TRUE(leftovers().empty()) << "leftovers before the test: " << leftovers().front();

    const std::vector<std::string> relay_cmd = {
        "sh", "-c",
        "trap '' HUP; sleep 1000 </dev/null >/dev/null 2>&1 & echo bg=$!; echo pid=$$; "
        "while :; do echo relay-relay-relay-relay-relay-relay-relay-relay; done"};
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < iterations; ++i) {
        const Phase phase = static_cast<Phase>(i % 4);
        SCOPED_TRACE(std::string("iteration ") + std::to_string(i) + ", phase " + name_of(phase) + ", seed " +
                     std::to_string(seed));
        DaemonProcess* d = start_daemon(cfg);
        ASSERT_NE(d, nullptr);
        std::vector<std::unique_ptr<RawClient>> clients;
        switch (phase) {
            case Phase::Startup: {
                for (int k = 0; k < 2; ++k) {
                    auto c = sleeper_session(hup_immune_sleepers());
                    ASSERT_NE(c, nullptr);
                    clients.push_back(std::move(c));
                }
                ASSERT_TRUE(d->stop(SIGKILL, Millis(10000)));
                count_after_kill(name_of(phase));
                Raw r = spawn_unready(cfg, static_cast<int>(i));
                ASSERT_GT(r.pid, 0);
                pause_us(rng.below(60000));
                kill_and_reap(r);
                break;
            }
            case Phase::Handshake: {
                UniqueFd dir = open_work_dir();
                const auto bytes = protocol::encode_frame(
                    FrameType::Start,
                    protocol::encode(RawClient::start_request(hup_immune_sleepers(), session_env(), dir.get())));
                for (int k = 0; k < 4; ++k) {
                    auto c = connect_as_account();
                    ASSERT_NE(c, nullptr);
                    const std::size_t n = k == 0 ? 0 : (k == 1 ? 1 + rng.below(bytes.size() - 1) : bytes.size());
                    if (n > 0) c->send(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)), {dir.get()});
                    clients.push_back(std::move(c));
                }
                pause_us(rng.below(20000));
                ASSERT_TRUE(d->stop(SIGKILL, Millis(10000)));
                count_after_kill(name_of(phase));
                break;
            }
            case Phase::Relay: {
                auto c = sleeper_session(relay_cmd);
                ASSERT_NE(c, nullptr);
                for (std::uint64_t k = 0, n = 1 + rng.below(200); k < n; ++k) {
                    const Incoming in = c->next(Millis(10000));
                    ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
                }
                ASSERT_TRUE(d->stop(SIGKILL, Millis(10000)));
                count_after_kill(name_of(phase));
                clients.push_back(std::move(c));
                break;
            }
            case Phase::Cleanup: {
                auto c = sleeper_session(hup_immune_sleepers());
                ASSERT_NE(c, nullptr);
                ASSERT_EQ(c->send_frame(FrameType::Stop, ""), 0);
                pause_us(rng.below(systemd() ? 20000 : 3000));
                ASSERT_TRUE(d->stop(SIGKILL, Millis(10000)));
                count_after_kill(name_of(phase));
                clients.push_back(std::move(c));
                break;
            }
        }
        ++kills[name_of(phase)];
        // The clients of the killed daemon see the end of their connection.
        for (auto& c : clients) {
            std::string seen;
            for (;;) {
                const Incoming in = c->next(Millis(10000));
                if (in.kind == Incoming::Kind::Eof) break;
                ASSERT_EQ(in.kind, Incoming::Kind::Frame) << "client of a killed daemon: " << in.describe();
            }
        }

        // The next daemon cleans up before READY.
        DaemonProcess* next = start_daemon(cfg);
        ASSERT_NE(next, nullptr);
        const auto left = leftovers();
        const auto records_left = records();
        EXPECT_EQ(left.size(), 0u) << "session cgroups, processes or units left after the restart";
        EXPECT_EQ(records_left.size(), 0u) << "session records left after the restart";
        for (const auto& l : left) ADD_FAILURE() << "left after restart: " << l;
        for (const auto& r : records_left) ADD_FAILURE() << "record left after restart: " << r;
        left_total += left.size();
        records_left_total += records_left.size();
        for (const auto& [pid, fd] : watched_)
            EXPECT_TRUE(wait_pidfd_exit(fd.get(), Millis(10000))) << "session process " << pid << " survived";
        watched_.clear();
        auto c = connect_as_account();
        ASSERT_NE(c, nullptr);
        ASSERT_TRUE(start_session(*c, {"echo", "after-crash"}));
        std::string seen;
        const auto exit = c->read_until_exit(Millis(20000), &seen);
        ASSERT_TRUE(exit) << seen;
        EXPECT_EQ(exit->shell_status(), 0);
        EXPECT_NE(c->output().find("after-crash"), std::string::npos);
        ASSERT_TRUE(next->stop(SIGTERM, Millis(30000)));
        ASSERT_TRUE(leftovers().empty()) << "after a clean shutdown: " << leftovers().front();
        ASSERT_TRUE(records().empty()) << "record after a clean shutdown: " << records().front();
        if (HasFatalFailure()) return;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "[crash safety] backend " << backend() << ", seed " << seed << ": " << iterations
              << " SIGKILLs in " << seconds << " s;";
    for (const auto& [phase, n] : kills)
        std::cout << " " << phase << "=" << n << " (leftovers right after the kill: " << orphans_made[phase]
                  << ", records: " << records_made[phase] << ")";
    std::cout << "; left after the restarts, summed: " << left_total << " "
              << (systemd() ? "units" : "session cgroups/processes") << ", " << records_left_total << " records\n";
}

}  // namespace
}  // namespace ptyvisor::itest
