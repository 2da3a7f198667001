// The metrics renderer: its text for a full report (golden), label escaping, an older daemon's
// report, and what promtool (the Prometheus text format) and the OpenMetrics reference parser
// (python3-prometheus-client) say of it. Both checkers are installed by scripts/install-deps.sh:
// a missing one fails these tests, it never skips them.
#include "cli/metrics_command.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ptyvisor::cli {
namespace {

using protocol::StatusReply;

// A daemon with two profiles' sessions, one of them ended, one whose cgroup tells nothing,
// and every counter: each family renders.
StatusReply full_report() {
    StatusReply r;
    r.version = "0.4.0";
    r.backend = "direct";
    StatusReply::Session a;
    a.unit = "ptyvisor-0123456789abcdef0123456789abcdef.service";
    a.pid = 4242;
    a.started_at = 1714557600;
    a.bytes_in = 12;
    a.bytes_out = 3456;
    a.argv0 = "bash";
    a.id = "0123456789abcdef0123456789abcdef";
    a.clients = 1;
    a.state = "running";
    a.profile = "strict";
    a.usage = StatusReply::Session::Usage{1'500'000, 4096, 8192, 3, 5, 0, 2, 100, 200};
    StatusReply::Session b;
    b.unit = "ptyvisor-fedcba9876543210fedcba9876543210.service";
    b.started_at = 1714557000;
    b.bytes_out = 7;
    b.argv0 = "make";
    b.id = "fedcba9876543210fedcba9876543210";
    b.detached = true;
    b.state = "ended";
    b.profile = "";
    b.usage = StatusReply::Session::Usage{};
    b.usage->cpu_usec = 250;
    r.sessions = {a, b};
    r.counters.accepted = 10;
    r.counters.rate_limited = 1;
    r.counters.handshake_timeouts = 2;
    r.counters.evicted = 0;
    r.counters.hung_up = 3;
    r.counters.quarantined = 0;
    r.counters.rejected = {{"busy", 2}, {"start_failed", 1}};
    r.counters.starts = std::map<std::string, std::uint64_t>{{"started", 5}, {"start_failed", 1}, {"busy", 2}};
    r.counters.ended = std::map<std::string, std::uint64_t>{{"exited", 3}, {"stopped", 1}};
    r.counters.relayed_in = 100;
    r.counters.relayed_out = 20000;
    r.counters.screen_worker_restarts = 1;
    r.counters.admission_waits = 2;
    r.counters.admission_wait_usec = 1'250'000;
    return r;
}

// Runs `command` through the shell with `input` on its stdin; its stdout and stderr together.
struct Ran {
    int status = -1;  // the exit status, or -1
    std::string output;
};
Ran run_with_input(const std::string& command, const std::string& input) {
    const std::string dir = ::testing::TempDir();
    const std::string in = dir + "/metrics_input." + std::to_string(::getpid());
    std::ofstream(in, std::ios::binary) << input;
    Ran ran;
    FILE* pipe = ::popen((command + " < '" + in + "' 2>&1").c_str(), "r");
    if (pipe == nullptr) return ran;
    std::array<char, 4096> buffer{};
    for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) ran.output.append(buffer.data(), n);
    const int status = ::pclose(pipe);
    ran.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::filesystem::remove(in);
    return ran;
}

bool have(const std::string& tool) { return run_with_input("command -v " + tool, "").status == 0; }

// The OpenMetrics reference parser, strict where promtool is not: # EOF, counter and unit
// naming, label syntax. Prints each family's name and type. Debian's python3, which the
// package is for: a python3 earlier in PATH (pyenv) may lack it.
constexpr const char* kOpenMetricsParser =
    "/usr/bin/python3 -c 'import sys\n"
    "from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse\n"
    "for f in parse(sys.stdin.read()): print(f.name, f.type, f.unit, len(f.samples))'";

TEST(RenderMetrics, GoldenOpenMetrics) {
    EXPECT_EQ(render_metrics(full_report(), MetricsFormat::OpenMetrics), R"(# HELP ptyvisor_build_info The daemon's version and backend; always 1.
# TYPE ptyvisor_build_info gauge
ptyvisor_build_info{version="0.4.0",backend="direct"} 1
# HELP ptyvisor_status_truncated 1 when the session list did not fit the daemon's report: per-session series are left out.
# TYPE ptyvisor_status_truncated gauge
ptyvisor_status_truncated 0
# HELP ptyvisor_sessions Sessions the daemon holds, by state and sandbox profile.
# TYPE ptyvisor_sessions gauge
ptyvisor_sessions{profile="",state="ended"} 1
ptyvisor_sessions{profile="",state="ending"} 0
ptyvisor_sessions{profile="",state="running"} 0
ptyvisor_sessions{profile="",state="starting"} 0
ptyvisor_sessions{profile="strict",state="ended"} 0
ptyvisor_sessions{profile="strict",state="ending"} 0
ptyvisor_sessions{profile="strict",state="running"} 1
ptyvisor_sessions{profile="strict",state="starting"} 0
# HELP ptyvisor_session_start_time_seconds When the session started, in Unix time.
# TYPE ptyvisor_session_start_time_seconds gauge
# UNIT ptyvisor_session_start_time_seconds seconds
ptyvisor_session_start_time_seconds{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 1714557600
ptyvisor_session_start_time_seconds{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 1714557000
# HELP ptyvisor_session_input_bytes Bytes of input the session's clients sent it.
# TYPE ptyvisor_session_input_bytes counter
# UNIT ptyvisor_session_input_bytes bytes
ptyvisor_session_input_bytes_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 12
ptyvisor_session_input_bytes_total{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 0
# HELP ptyvisor_session_output_bytes Bytes of output the session's terminal wrote.
# TYPE ptyvisor_session_output_bytes counter
# UNIT ptyvisor_session_output_bytes bytes
ptyvisor_session_output_bytes_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 3456
ptyvisor_session_output_bytes_total{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 7
# HELP ptyvisor_session_clients Connections attached to the session.
# TYPE ptyvisor_session_clients gauge
ptyvisor_session_clients{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 1
ptyvisor_session_clients{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 0
# HELP ptyvisor_session_cpu_seconds CPU time the session's processes used (user and system).
# TYPE ptyvisor_session_cpu_seconds counter
# UNIT ptyvisor_session_cpu_seconds seconds
ptyvisor_session_cpu_seconds_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 1.5
ptyvisor_session_cpu_seconds_total{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 0.00025
# HELP ptyvisor_session_memory_bytes Memory the session's cgroup uses now.
# TYPE ptyvisor_session_memory_bytes gauge
# UNIT ptyvisor_session_memory_bytes bytes
ptyvisor_session_memory_bytes{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 4096
# HELP ptyvisor_session_memory_peak_bytes Most memory the session's cgroup has used.
# TYPE ptyvisor_session_memory_peak_bytes gauge
# UNIT ptyvisor_session_memory_peak_bytes bytes
ptyvisor_session_memory_peak_bytes{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 8192
# HELP ptyvisor_session_tasks Tasks (processes and threads) in the session now.
# TYPE ptyvisor_session_tasks gauge
ptyvisor_session_tasks{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 3
# HELP ptyvisor_session_tasks_peak Most tasks the session has had at once.
# TYPE ptyvisor_session_tasks_peak gauge
ptyvisor_session_tasks_peak{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 5
# HELP ptyvisor_session_oom_kills Processes of the session the OOM killer ended.
# TYPE ptyvisor_session_oom_kills counter
ptyvisor_session_oom_kills_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 0
# HELP ptyvisor_session_tasks_limit_hits Forks refused because the session was at its task limit.
# TYPE ptyvisor_session_tasks_limit_hits counter
ptyvisor_session_tasks_limit_hits_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 2
# HELP ptyvisor_session_io_read_bytes Bytes the session's processes read from block devices.
# TYPE ptyvisor_session_io_read_bytes counter
# UNIT ptyvisor_session_io_read_bytes bytes
ptyvisor_session_io_read_bytes_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 100
# HELP ptyvisor_session_io_write_bytes Bytes the session's processes wrote to block devices.
# TYPE ptyvisor_session_io_write_bytes counter
# UNIT ptyvisor_session_io_write_bytes bytes
ptyvisor_session_io_write_bytes_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 200
# HELP ptyvisor_connections_accepted Connections the daemon accepted.
# TYPE ptyvisor_connections_accepted counter
ptyvisor_connections_accepted_total 10
# HELP ptyvisor_connections_hung_up Connections dropped at accept: the peer had already closed.
# TYPE ptyvisor_connections_hung_up counter
ptyvisor_connections_hung_up_total 3
# HELP ptyvisor_handshake_timeouts Connections closed because their handshake took too long.
# TYPE ptyvisor_handshake_timeouts counter
ptyvisor_handshake_timeouts_total 2
# HELP ptyvisor_handshakes_evicted Handshakes evicted to make room for another peer's.
# TYPE ptyvisor_handshakes_evicted counter
ptyvisor_handshakes_evicted_total 0
# HELP ptyvisor_admissions_rate_limited STARTs refused by the admission rate limit.
# TYPE ptyvisor_admissions_rate_limited counter
ptyvisor_admissions_rate_limited_total 1
# HELP ptyvisor_refusals Requests refused with an ERROR, by its code.
# TYPE ptyvisor_refusals counter
ptyvisor_refusals_total{code="busy"} 2
ptyvisor_refusals_total{code="start_failed"} 1
# HELP ptyvisor_starts STARTs by result: started, or the code that refused it.
# TYPE ptyvisor_starts counter
ptyvisor_starts_total{result="busy"} 2
ptyvisor_starts_total{result="start_failed"} 1
ptyvisor_starts_total{result="started"} 5
# HELP ptyvisor_sessions_ended Sessions that ended, by the reason they ended.
# TYPE ptyvisor_sessions_ended counter
ptyvisor_sessions_ended_total{reason="exited"} 3
ptyvisor_sessions_ended_total{reason="stopped"} 1
# HELP ptyvisor_sessions_quarantined Sessions whose processes outlived their cleanup.
# TYPE ptyvisor_sessions_quarantined counter
ptyvisor_sessions_quarantined_total 0
# HELP ptyvisor_relayed_input_bytes Input bytes relayed to sessions over the daemon's life.
# TYPE ptyvisor_relayed_input_bytes counter
# UNIT ptyvisor_relayed_input_bytes bytes
ptyvisor_relayed_input_bytes_total 100
# HELP ptyvisor_relayed_output_bytes Output bytes relayed from sessions over the daemon's life.
# TYPE ptyvisor_relayed_output_bytes counter
# UNIT ptyvisor_relayed_output_bytes bytes
ptyvisor_relayed_output_bytes_total 20000
# HELP ptyvisor_screen_worker_restarts Times the screen worker was started again after it went.
# TYPE ptyvisor_screen_worker_restarts counter
ptyvisor_screen_worker_restarts_total 1
# HELP ptyvisor_admission_wait_seconds STARTs that waited for the backend to check their peer again, and how long.
# TYPE ptyvisor_admission_wait_seconds summary
# UNIT ptyvisor_admission_wait_seconds seconds
ptyvisor_admission_wait_seconds_count 2
ptyvisor_admission_wait_seconds_sum 1.25
# EOF
)");
}

TEST(RenderMetrics, GoldenPrometheusText) {
    EXPECT_EQ(render_metrics(full_report(), MetricsFormat::PrometheusText), R"(# HELP ptyvisor_build_info The daemon's version and backend; always 1.
# TYPE ptyvisor_build_info gauge
ptyvisor_build_info{version="0.4.0",backend="direct"} 1
# HELP ptyvisor_status_truncated 1 when the session list did not fit the daemon's report: per-session series are left out.
# TYPE ptyvisor_status_truncated gauge
ptyvisor_status_truncated 0
# HELP ptyvisor_sessions Sessions the daemon holds, by state and sandbox profile.
# TYPE ptyvisor_sessions gauge
ptyvisor_sessions{profile="",state="ended"} 1
ptyvisor_sessions{profile="",state="ending"} 0
ptyvisor_sessions{profile="",state="running"} 0
ptyvisor_sessions{profile="",state="starting"} 0
ptyvisor_sessions{profile="strict",state="ended"} 0
ptyvisor_sessions{profile="strict",state="ending"} 0
ptyvisor_sessions{profile="strict",state="running"} 1
ptyvisor_sessions{profile="strict",state="starting"} 0
# HELP ptyvisor_session_start_time_seconds When the session started, in Unix time.
# TYPE ptyvisor_session_start_time_seconds gauge
ptyvisor_session_start_time_seconds{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 1714557600
ptyvisor_session_start_time_seconds{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 1714557000
# HELP ptyvisor_session_input_bytes_total Bytes of input the session's clients sent it.
# TYPE ptyvisor_session_input_bytes_total counter
ptyvisor_session_input_bytes_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 12
ptyvisor_session_input_bytes_total{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 0
# HELP ptyvisor_session_output_bytes_total Bytes of output the session's terminal wrote.
# TYPE ptyvisor_session_output_bytes_total counter
ptyvisor_session_output_bytes_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 3456
ptyvisor_session_output_bytes_total{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 7
# HELP ptyvisor_session_clients Connections attached to the session.
# TYPE ptyvisor_session_clients gauge
ptyvisor_session_clients{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 1
ptyvisor_session_clients{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 0
# HELP ptyvisor_session_cpu_seconds_total CPU time the session's processes used (user and system).
# TYPE ptyvisor_session_cpu_seconds_total counter
ptyvisor_session_cpu_seconds_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 1.5
ptyvisor_session_cpu_seconds_total{id="fedcba9876543210fedcba9876543210",profile="",state="ended"} 0.00025
# HELP ptyvisor_session_memory_bytes Memory the session's cgroup uses now.
# TYPE ptyvisor_session_memory_bytes gauge
ptyvisor_session_memory_bytes{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 4096
# HELP ptyvisor_session_memory_peak_bytes Most memory the session's cgroup has used.
# TYPE ptyvisor_session_memory_peak_bytes gauge
ptyvisor_session_memory_peak_bytes{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 8192
# HELP ptyvisor_session_tasks Tasks (processes and threads) in the session now.
# TYPE ptyvisor_session_tasks gauge
ptyvisor_session_tasks{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 3
# HELP ptyvisor_session_tasks_peak Most tasks the session has had at once.
# TYPE ptyvisor_session_tasks_peak gauge
ptyvisor_session_tasks_peak{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 5
# HELP ptyvisor_session_oom_kills_total Processes of the session the OOM killer ended.
# TYPE ptyvisor_session_oom_kills_total counter
ptyvisor_session_oom_kills_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 0
# HELP ptyvisor_session_tasks_limit_hits_total Forks refused because the session was at its task limit.
# TYPE ptyvisor_session_tasks_limit_hits_total counter
ptyvisor_session_tasks_limit_hits_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 2
# HELP ptyvisor_session_io_read_bytes_total Bytes the session's processes read from block devices.
# TYPE ptyvisor_session_io_read_bytes_total counter
ptyvisor_session_io_read_bytes_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 100
# HELP ptyvisor_session_io_write_bytes_total Bytes the session's processes wrote to block devices.
# TYPE ptyvisor_session_io_write_bytes_total counter
ptyvisor_session_io_write_bytes_total{id="0123456789abcdef0123456789abcdef",profile="strict",state="running"} 200
# HELP ptyvisor_connections_accepted_total Connections the daemon accepted.
# TYPE ptyvisor_connections_accepted_total counter
ptyvisor_connections_accepted_total 10
# HELP ptyvisor_connections_hung_up_total Connections dropped at accept: the peer had already closed.
# TYPE ptyvisor_connections_hung_up_total counter
ptyvisor_connections_hung_up_total 3
# HELP ptyvisor_handshake_timeouts_total Connections closed because their handshake took too long.
# TYPE ptyvisor_handshake_timeouts_total counter
ptyvisor_handshake_timeouts_total 2
# HELP ptyvisor_handshakes_evicted_total Handshakes evicted to make room for another peer's.
# TYPE ptyvisor_handshakes_evicted_total counter
ptyvisor_handshakes_evicted_total 0
# HELP ptyvisor_admissions_rate_limited_total STARTs refused by the admission rate limit.
# TYPE ptyvisor_admissions_rate_limited_total counter
ptyvisor_admissions_rate_limited_total 1
# HELP ptyvisor_refusals_total Requests refused with an ERROR, by its code.
# TYPE ptyvisor_refusals_total counter
ptyvisor_refusals_total{code="busy"} 2
ptyvisor_refusals_total{code="start_failed"} 1
# HELP ptyvisor_starts_total STARTs by result: started, or the code that refused it.
# TYPE ptyvisor_starts_total counter
ptyvisor_starts_total{result="busy"} 2
ptyvisor_starts_total{result="start_failed"} 1
ptyvisor_starts_total{result="started"} 5
# HELP ptyvisor_sessions_ended_total Sessions that ended, by the reason they ended.
# TYPE ptyvisor_sessions_ended_total counter
ptyvisor_sessions_ended_total{reason="exited"} 3
ptyvisor_sessions_ended_total{reason="stopped"} 1
# HELP ptyvisor_sessions_quarantined_total Sessions whose processes outlived their cleanup.
# TYPE ptyvisor_sessions_quarantined_total counter
ptyvisor_sessions_quarantined_total 0
# HELP ptyvisor_relayed_input_bytes_total Input bytes relayed to sessions over the daemon's life.
# TYPE ptyvisor_relayed_input_bytes_total counter
ptyvisor_relayed_input_bytes_total 100
# HELP ptyvisor_relayed_output_bytes_total Output bytes relayed from sessions over the daemon's life.
# TYPE ptyvisor_relayed_output_bytes_total counter
ptyvisor_relayed_output_bytes_total 20000
# HELP ptyvisor_screen_worker_restarts_total Times the screen worker was started again after it went.
# TYPE ptyvisor_screen_worker_restarts_total counter
ptyvisor_screen_worker_restarts_total 1
# HELP ptyvisor_admission_wait_seconds STARTs that waited for the backend to check their peer again, and how long.
# TYPE ptyvisor_admission_wait_seconds summary
ptyvisor_admission_wait_seconds_count 2
ptyvisor_admission_wait_seconds_sum 1.25
)");
}

// Label values come from the daemon (a profile name, an error code): a quote, a backslash or
// a newline in one must not end the value or the line.
TEST(RenderMetrics, LabelValuesAreEscaped) {
    StatusReply r = full_report();
    r.sessions[0].profile = "a\"b\\c\nd";
    r.counters.rejected = {{"we\"ird\ncode\\", 1}};
    for (const auto format : {MetricsFormat::OpenMetrics, MetricsFormat::PrometheusText}) {
        const std::string text = render_metrics(r, format);
        EXPECT_NE(text.find(R"(profile="a\"b\\c\nd")"), std::string::npos) << text;
        EXPECT_NE(text.find(R"(ptyvisor_refusals_total{code="we\"ird\ncode\\"} 1)"), std::string::npos) << text;
        // Every line is a comment or a sample: no raw newline got through.
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);)
            EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("ptyvisor_", 0) == 0) << line;
    }
}

// An older daemon's report: no state, profile or usage per session, none of the new counters.
// Those series are left out, never shown as zero; what it does say is rendered.
TEST(RenderMetrics, OlderDaemonsReportLeavesOutWhatItLacks) {
    StatusReply r = full_report();
    for (auto& s : r.sessions) {
        s.state.reset();
        s.profile.reset();
        s.usage.reset();
    }
    r.counters.hung_up.reset();
    r.counters.quarantined.reset();
    r.counters.starts.reset();
    r.counters.ended.reset();
    r.counters.relayed_in.reset();
    r.counters.relayed_out.reset();
    r.counters.screen_worker_restarts.reset();
    r.counters.admission_waits.reset();
    r.counters.admission_wait_usec.reset();
    const std::string text = render_metrics(r, MetricsFormat::OpenMetrics);
    for (const char* absent : {"ptyvisor_sessions{", "ptyvisor_session_cpu", "ptyvisor_session_memory", "state=",
                               "profile=", "ptyvisor_starts", "ptyvisor_sessions_ended", "ptyvisor_relayed",
                               "ptyvisor_screen_worker", "ptyvisor_admission_wait", "ptyvisor_connections_hung_up",
                               "ptyvisor_sessions_quarantined"})
        EXPECT_EQ(text.find(absent), std::string::npos) << absent << "\n" << text;
    EXPECT_NE(text.find("ptyvisor_session_output_bytes_total{id=\"0123456789abcdef0123456789abcdef\"} 3456\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("ptyvisor_refusals_total{code=\"busy\"} 2\n"), std::string::npos) << text;
    EXPECT_NE(text.find("ptyvisor_connections_accepted_total 10\n"), std::string::npos) << text;
    // A version 1 daemon's sessions have no id: no per-session series at all.
    for (auto& s : r.sessions) s.id.clear();
    EXPECT_EQ(render_metrics(r, MetricsFormat::OpenMetrics).find("ptyvisor_session_"), std::string::npos);
}

// A daemon whose list did not fit says so; no session series then (they would read as none).
TEST(RenderMetrics, TruncatedListHasNoSessionSeries) {
    StatusReply r = full_report();
    r.sessions.clear();
    r.truncated = true;
    const std::string text = render_metrics(r, MetricsFormat::OpenMetrics);
    EXPECT_NE(text.find("ptyvisor_status_truncated 1\n"), std::string::npos) << text;
    EXPECT_EQ(text.find("ptyvisor_sessions{"), std::string::npos) << text;
    EXPECT_NE(text.find("ptyvisor_starts_total{result=\"started\"} 5\n"), std::string::npos) << text;
}

// A new daemon with no session: every state reads 0 for no profile, rather than nothing.
TEST(RenderMetrics, NoSessionsIsZeroInEveryState) {
    StatusReply r = full_report();
    r.sessions.clear();
    const std::string text = render_metrics(r, MetricsFormat::OpenMetrics);
    for (const char* state : {"starting", "running", "ending", "ended"})
        EXPECT_NE(text.find(std::string("ptyvisor_sessions{profile=\"\",state=\"") + state + "\"} 0\n"), std::string::npos)
            << text;
}

// The same id twice (a daemon that should not) would make duplicate series, which Prometheus
// rejects whole: the second is left out.
TEST(RenderMetrics, DuplicateSessionIdsRenderOnce) {
    StatusReply r = full_report();
    r.sessions[1].id = r.sessions[0].id;
    const std::string text = render_metrics(r, MetricsFormat::OpenMetrics);
    EXPECT_EQ(text.find("fedcba98"), std::string::npos);
    const auto first = text.find("ptyvisor_session_clients{");
    ASSERT_NE(first, std::string::npos);
    EXPECT_EQ(text.find("ptyvisor_session_clients{", first + 1), std::string::npos) << text;
}

// promtool parses the Prometheus text format (not OpenMetrics) and lints it: the --textfile
// dialect passes with nothing to say.
TEST(RenderMetricsCheckedBy, PromtoolPassesThePrometheusText) {
    ASSERT_TRUE(have("promtool")) << "promtool is missing: scripts/install-deps.sh installs it (Debian's prometheus)";
    const Ran ran = run_with_input("promtool check metrics", render_metrics(full_report(), MetricsFormat::PrometheusText));
    EXPECT_EQ(ran.status, 0) << ran.output;
    EXPECT_EQ(ran.output, "");
}

// What promtool really says of the OpenMetrics dialect: it parses (# UNIT and # EOF are
// comments to it), but it reads each counter's samples (x_total) as a family apart from the
// described one (x), untyped and without help. That is why --textfile, which node_exporter's
// same parser reads, writes the Prometheus text format.
TEST(RenderMetricsCheckedBy, PromtoolReadsOpenMetricsCountersAsUndescribed) {
    ASSERT_TRUE(have("promtool")) << "promtool is missing: scripts/install-deps.sh installs it (Debian's prometheus)";
    const Ran ran = run_with_input("promtool check metrics", render_metrics(full_report(), MetricsFormat::OpenMetrics));
    EXPECT_EQ(ran.status, 3) << "3: lint problems, not a parse error (1)\n" << ran.output;
    std::istringstream lines(ran.output);
    int problems = 0;
    for (std::string line; std::getline(lines, line); ++problems)
        EXPECT_TRUE(line.find("_total no help text") != std::string::npos) << line;
    EXPECT_GT(problems, 0);
}

// The OpenMetrics reference parser reads the stdout dialect strictly, every family whole.
TEST(RenderMetricsCheckedBy, OpenMetricsParserReadsEveryFamily) {
    ASSERT_EQ(run_with_input("/usr/bin/python3 -c 'import prometheus_client'", "").status, 0)
        << "python3-prometheus-client is missing: scripts/install-deps.sh installs it";
    const Ran ran = run_with_input(kOpenMetricsParser, render_metrics(full_report(), MetricsFormat::OpenMetrics));
    ASSERT_EQ(ran.status, 0) << ran.output;
    for (const char* family : {"ptyvisor_build_info gauge", "ptyvisor_starts counter", "ptyvisor_relayed_input_bytes counter bytes",
                               "ptyvisor_admission_wait_seconds summary seconds", "ptyvisor_sessions gauge",
                               "ptyvisor_session_cpu_seconds counter seconds 2"})
        EXPECT_NE(ran.output.find(family), std::string::npos) << family << "\n" << ran.output;
    // Without its # EOF it is refused: the parser does check the end.
    std::string cut = render_metrics(full_report(), MetricsFormat::OpenMetrics);
    cut.erase(cut.rfind("# EOF"));
    EXPECT_NE(run_with_input(kOpenMetricsParser, cut).status, 0);
}

TEST(WriteFileAtomically, ReplacesTheFileWholeWithMode0644) {
    const std::string dir = ::testing::TempDir() + "/metrics_textfile." + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    const std::string path = dir + "/ptyvisor.prom";
    std::ofstream(path) << "old\n";
    std::string why;
    ASSERT_TRUE(write_file_atomically(path, "new\n", why)) << why;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), "new\n");
    struct stat st{};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0644u);
    // Nothing else is left in the directory: the temporary file was renamed.
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
    std::filesystem::remove_all(dir);
}

TEST(WriteFileAtomically, FailsWithWhyAndLeavesNothing) {
    std::string why;
    EXPECT_FALSE(write_file_atomically("/nonexistent-dir-for-metrics/x.prom", "x", why));
    EXPECT_NE(why.find("/nonexistent-dir-for-metrics"), std::string::npos) << why;
    EXPECT_FALSE(write_file_atomically("/tmp/", "x", why));
}

}  // namespace
}  // namespace ptyvisor::cli
