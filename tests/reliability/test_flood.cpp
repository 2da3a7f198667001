// Scenario 1, flood fairness: hostile processes of the agent's account cannot lock it out.
//
// Hostile processes of the agent's own account flood the socket (holding connections,
// slowloris, garbage, connect-close loops, failing authentication) while the allowed agent,
// a different process, asks for sessions one after the other. Its time from connect() to
// STARTED is measured under each flood and without one, and printed. What is asserted is
// correctness: every request of the agent gets STARTED (never a refusal, never the client's
// own timeout), and the flood was real (the flooders made connections and the daemon
// answered them). The latencies are figures, printed and recorded, never a pass/fail
// threshold: on a loaded 2-core machine they measure the load as much as the daemon. The
// admission goals are measured by bench/ (docs/performance.md).
//
// Mode (a), uid-only (this file's Flood suite): no allow_units, so every process of the
// account is as entitled as the agent; the per-process share of handshake slots
// (docs/admission.md) must keep the agent in. The flooders are therefore kept to
// max_unauthenticated / max_unauthenticated_per_peer processes per kind or fewer (8 x 4 = 32):
// with more distinct processes than that, each holding one half-open handshake, uid-only
// admission cannot tell the agent from them by design; that case belongs to mode (b).
//
// Mode (b), allow_units (FloodAllowUnits): needs systemd; runs inside the harness
// (tests/reliability/run-systemd.sh). The agent runs as a transient unit named in
// allow_units; the flooders, outside it, must be refused at accept time (not_allowed).
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "rel_support.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using rel::FloodKind;

struct FloodCase {
    const char* name;
    std::vector<FloodKind> kinds;  // empty: no flood (the baseline)
};

const std::vector<FloodCase> kCases = {
    {"none", {}},
    {"hold", {FloodKind::Hold}},
    {"slowloris", {FloodKind::Slowloris}},
    {"garbage", {FloodKind::Garbage}},
    {"connect_close", {FloodKind::ConnectClose}},
    {"fail_auth", {FloodKind::FailAuth}},
    {"all", {FloodKind::Hold, FloodKind::Slowloris, FloodKind::Garbage, FloodKind::ConnectClose,
             FloodKind::FailAuth}},
};

void PrintTo(const FloodCase& c, std::ostream* os) { *os << c.name; }

class Flood : public EndToEnd, public ::testing::WithParamInterface<FloodCase> {
protected:
    // Starts one Flood per kind. Processes per kind: the whole fair-share budget (8) for a
    // single kind, 2 each when all five run at once.
    std::vector<std::unique_ptr<rel::Flood>> start_floods(const std::vector<FloodKind>& kinds,
                                                          std::size_t agent_requests_hint) {
        (void)agent_requests_hint;
        std::vector<std::unique_ptr<rel::Flood>> floods;
        for (const FloodKind k : kinds) {
            rel::FloodOptions o;
            o.kind = k;
            o.socket = socket_;
            o.work_dir = work_;
            o.processes = kinds.size() == 1 ? static_cast<unsigned>(scaled(4, 8)) : 2;
            o.connections = static_cast<unsigned>(scaled(64, 256));
            o.slowloris_interval = full_scale() ? Millis(4000) : Millis(1000);
            o.seed = rel::seed(1) + static_cast<std::uint64_t>(k);
            std::string error;
            auto f = rel::Flood::start(o, *account_, error);
            if (!f) {
                ADD_FAILURE() << "cannot start the " << rel::to_string(k) << " flood: " << error;
                return {};
            }
            floods.push_back(std::move(f));
        }
        for (auto& f : floods)
            if (!f->wait_engaged(Millis(30000))) ADD_FAILURE() << "a flooder never engaged";
        return floods;
    }
};

TEST_P(Flood, AgentAlwaysGetsItsSessionUidOnly) {
    const FloodCase& fc = GetParam();
    DaemonConfig cfg = config();  // default limits: 32 handshakes, 4 per process, 120/min
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);

    // The agent: a process of its own (a Connector), distinct from every flooder.
    std::string error;
    auto agent = Connector::start(account_->uid, account_->gid, {account_->gid}, error);
    ASSERT_NE(agent, nullptr) << error;
    UniqueFd cwd = open_work_dir();
    ASSERT_TRUE(cwd);

    // A fresh daemon's bucket holds 120 admissions; the agent's requests stay within it so
    // that the rate limit, which is not the subject, never answers.
    const std::size_t requests = scaled(25, 100);
    auto floods = start_floods(fc.kinds, requests);
    ASSERT_EQ(floods.size(), fc.kinds.size());

    const auto t0 = Clock::now();
    const auto result = rel::run_agent(
        [&] {
            int err = 0;
            return agent->connect(socket_, err);
        },
        cwd.get(), session_env(), requests);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();

    rel::FloodStats total;
    for (auto& f : floods) {
        const auto s = f->stop();
        total.attempts += s.attempts;
        total.backlog_full += s.backlog_full;
        total.closed_silently += s.closed_silently;
        for (const auto& [k, v] : s.errors) total.errors[k] += v;
    }
    const auto lat = rel::summarize(result.ms);
    std::cout << "[flood uid-only] " << fc.name << ": agent " << lat.describe() << " over "
              << seconds << " s; flood " << total.describe() << "\n";
    RecordProperty("agent_p50_ms", std::to_string(lat.p50));
    RecordProperty("agent_p99_ms", std::to_string(lat.p99));
    RecordProperty("flood", total.describe());

    for (const auto& [what, n] : result.failures) ADD_FAILURE() << n << " of " << requests << " agent requests: " << what;
    EXPECT_TRUE(result.failures.empty()) << "first: " << result.first_failure;
    EXPECT_EQ(result.ms.size(), requests);
    if (!fc.kinds.empty()) {
        EXPECT_GT(total.attempts, 0) << "the flood made no connection";
    }
    EXPECT_TRUE(d->running());
}

INSTANTIATE_TEST_SUITE_P(Kinds, Flood, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return std::string(p.param.name); });

// ---------------------------------------------------------------------------------------
// Mode (b): allow_units, systemd backend, inside the harness.

bool inside_systemd() {
    struct stat st{};
    return backend() == "systemd" && ::stat("/run/systemd/system", &st) == 0;
}

// The agent runs as the test account: from a copy it can reach, where the build is not.
std::string agent_binary() {
    static const std::string path = [] {
        const char* v = std::getenv("PTYVISOR_RELIABILITY_AGENT");
        if (v != nullptr && *v != '\0') return reachable_by_account(v);
#ifdef PTYVISOR_RELIABILITY_AGENT_DEFAULT
        return reachable_by_account(PTYVISOR_RELIABILITY_AGENT_DEFAULT);
#else
        return std::string();
#endif
    }();
    return path;
}

// What the agent unit did: its report, and its latencies to STARTED.
struct AgentUnitRun {
    std::optional<ExitInfo> exit;
    std::string systemd_run_output;
    std::string report;
    std::vector<double> ms;
    double seconds = 0;
};

// Runs the reliability agent as rel-agent.service (the allowed unit) until it has made
// `requests` requests, with `extra` arguments.
AgentUnitRun run_agent_unit(const std::string& socket, const std::string& work, const Account& account,
                            const std::string& out, std::size_t requests,
                            const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {
        "systemd-run", "--quiet", "--wait", "--collect", "--unit=rel-agent.service", "-p", "Type=exec",
        "-p", "User=" + account.name, "-p", "WorkingDirectory=" + work, "-p",
        "StandardOutput=file:" + out, "-p", "StandardError=inherit", agent_binary(), "--socket", socket,
        "--count", std::to_string(requests)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    AgentUnitRun r;
    const auto t0 = Clock::now();
    r.exit = rel::run_captured(argv, Millis(300000), r.systemd_run_output);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.report = read_text_file(out);
    std::size_t at = 0;
    while ((at = r.report.find("lat ", at)) != std::string::npos) {
        r.ms.push_back(std::stod(r.report.substr(at + 4)));
        at += 4;
    }
    return r;
}

class FloodAllowUnits : public EndToEnd, public ::testing::WithParamInterface<FloodCase> {};

TEST_P(FloodAllowUnits, FloodersAreRefusedAtAcceptAndTheAgentUnitIsServed) {
    PTYVISOR_NEEDS_SYSTEMD_HARNESS(inside_systemd());
    const FloodCase& fc = GetParam();
    DaemonConfig cfg = config();
    cfg.allow_units = {"rel-agent.service"};
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    ASSERT_FALSE(agent_binary().empty()) << "set PTYVISOR_RELIABILITY_AGENT";

    // Many more flooding processes than uid-only admission could share slots with: here
    // none of them may hold anything at all.
    std::vector<std::unique_ptr<rel::Flood>> floods;
    for (const FloodKind k : fc.kinds) {
        rel::FloodOptions o;
        o.kind = k;
        o.socket = socket_;
        o.work_dir = work_;
        o.processes = static_cast<unsigned>(fc.kinds.size() == 1 ? scaled(16, 64) : scaled(4, 16));
        o.connections = static_cast<unsigned>(scaled(32, 64));
        o.slowloris_interval = full_scale() ? Millis(4000) : Millis(1000);
        o.seed = rel::seed(7) + static_cast<std::uint64_t>(k);
        std::string error;
        auto f = rel::Flood::start(o, *account_, error);
        ASSERT_NE(f, nullptr) << error;
        floods.push_back(std::move(f));
    }
    for (auto& f : floods) ASSERT_TRUE(f->wait_engaged(Millis(30000)));

    const std::size_t requests = scaled(25, 100);
    const auto run = run_agent_unit(socket_, work_, *account_, *dir_ / "agent.out", requests);

    rel::FloodStats total;
    for (auto& f : floods) {
        const auto s = f->stop();
        total.attempts += s.attempts;
        total.backlog_full += s.backlog_full;
        total.closed_silently += s.closed_silently;
        for (const auto& [k, v] : s.errors) total.errors[k] += v;
    }
    const auto lat = rel::summarize(run.ms);
    std::cout << "[flood allow_units] " << fc.name << ": agent " << lat.describe() << " over "
              << run.seconds << " s; flood " << total.describe() << "\n";
    RecordProperty("agent_p50_ms", std::to_string(lat.p50));
    RecordProperty("agent_p99_ms", std::to_string(lat.p99));

    ASSERT_TRUE(run.exit) << "systemd-run did not finish: " << run.systemd_run_output;
    EXPECT_TRUE(run.exit->exited_with(0)) << run.exit->describe() << "\nsystemd-run: "
                                          << run.systemd_run_output << "\nagent: " << run.report;
    EXPECT_EQ(run.ms.size(), requests) << run.report;
    if (!fc.kinds.empty()) {
        EXPECT_GT(total.attempts, 0);
        // Refused at accept time: not_allowed is the only answer any flooder may get, and
        // every connection got it (a flooder that closed first counts as silent only if it
        // closed before reading, which ConnectClose does by construction).
        for (const auto& [code, n] : total.errors)
            EXPECT_EQ(code, "not_allowed") << n << " flooder connections got " << code;
        if (fc.kinds.size() == 1 && fc.kinds[0] != FloodKind::ConnectClose) {
            EXPECT_EQ(total.closed_silently, 0) << total.describe();
        }
    }
    EXPECT_TRUE(d->running());
}

INSTANTIATE_TEST_SUITE_P(Kinds, FloodAllowUnits, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return std::string(p.param.name); });

// The attackers that matter most with allow_units: the agent's own children, in its own
// unit and cgroup, flooding from its first millisecond and asking for sessions exactly as
// it does, while the daemon may not have learnt the unit's new MainPID yet. The agent gets
// every session; a sibling gets none.
class FloodFromTheAgentsUnit : public EndToEnd {};

TEST_F(FloodFromTheAgentsUnit, SiblingsGetNoSessionAndTheAgentIsServed) {
    PTYVISOR_NEEDS_SYSTEMD_HARNESS(inside_systemd());
    DaemonConfig cfg = config();
    cfg.allow_units = {"rel-agent.service"};
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    const std::size_t requests = scaled(25, 100);
    const auto run = run_agent_unit(socket_, work_, *account_, *dir_ / "agent.out", requests,
                                    {"--sibling-flood", "all", "--sibling-requests", std::to_string(requests)});
    const auto lat = rel::summarize(run.ms);
    std::cout << "[flood from the agent's unit] agent " << lat.describe() << " over " << run.seconds
              << " s\n" << run.report.substr(run.report.find("sibling"));

    ASSERT_TRUE(run.exit) << "systemd-run did not finish: " << run.systemd_run_output;
    EXPECT_TRUE(run.exit->exited_with(0)) << run.exit->describe() << "\nagent: " << run.report;
    EXPECT_EQ(run.ms.size(), requests) << run.report;
    // Every sibling request refused as not the main process, however early it came.
    EXPECT_NE(run.report.find("sibling requests started 0, " + std::to_string(requests) + " x ERROR not_allowed\n"),
              std::string::npos)
        << run.report;
    EXPECT_EQ(run.report.find("sibling flood failed"), std::string::npos) << run.report;
    EXPECT_TRUE(d->running());
}

}  // namespace
}  // namespace ptyvisor::itest
