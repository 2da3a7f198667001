// `ptyvisor metrics` against the real daemon: one session running and one ended, then the
// metrics as root, checked by the checkers Prometheus users have. promtool (Debian's
// prometheus) parses the Prometheus text format, which --textfile writes: it must pass with
// nothing to say. Fed the OpenMetrics dialect it parses too, but reads each counter's
// `x_total` samples as an undescribed family; the OpenMetrics reference parser
// (python3-prometheus-client) reads that dialect strictly. A missing checker fails the test
// (scripts/install-deps.sh installs both); it never skips.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

constexpr Millis kExit{60000};

struct Ran {
    int status = -1;
    std::string output;  // stdout and stderr together
};

// `command` through the shell (which redirects its stdin where it needs one).
Ran shell(const std::string& command) {
    Ran ran;
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) return ran;
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) ran.output.append(buffer, n);
    const int status = ::pclose(pipe);
    ran.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return ran;
}

class Metrics : public EndToEnd {
protected:
    struct Result {
        int status = -1;
        std::string out, transcript;
    };

    // `ptyvisor ARGS...` as `account`.
    Result cli_as(const Account& account, const std::vector<std::string>& args) {
        std::string error;
        auto options = client_options(ClientOptions::Stdin::Null);
        options.env = client_environment(account, socket_, "dumb");
        auto c = ClientProcess::spawn(cli_binary(), args, account, options, error);
        if (!c) {
            ADD_FAILURE() << "cannot start the CLI: " << error;
            return {};
        }
        const auto exit = c->wait_exit(kExit);
        if (!exit) ADD_FAILURE() << "the CLI did not exit; " << c->transcript();
        return {exit ? exit->shell() : -1, c->out(), c->transcript()};
    }
    Result cli(const std::vector<std::string>& args) { return cli_as(*account_, args); }
    Result cli_as_root(const std::vector<std::string>& args) { return cli_as(Account{"root", 0, 0, "/root"}, args); }

    // A running session that wrote "hello", and one that ended: every family has something.
    void run_sessions() {
        running_ = start_detached({"sh", "-c", "echo hello; exec sleep 600"});
        ASSERT_FALSE(running_.empty());
        ASSERT_EQ(cli({"wait", "--timeout", "20", "--for", "text:hello", running_}).status, 0);
        const std::string ended = start_detached({"true"});
        ASSERT_FALSE(ended.empty());
        ASSERT_EQ(cli({"wait", "--timeout", "20", ended}).status, 0);
    }

    std::string write_file(const std::string& name, const std::string& text) {
        const std::string path = *dir_ / name;
        std::ofstream(path, std::ios::binary) << text;
        return path;
    }

    std::string running_;
};

TEST_F(Metrics, LiveDaemonsMetricsPassPromtoolAndTheOpenMetricsParser) {
    ASSERT_EQ(shell("command -v promtool").status, 0)
        << "promtool is missing: scripts/install-deps.sh installs it (Debian's prometheus)";
    ASSERT_EQ(shell("/usr/bin/python3 -c 'import prometheus_client'").status, 0)
        << "python3-prometheus-client is missing: scripts/install-deps.sh installs it";
    ASSERT_TRUE(start_daemon());
    run_sessions();
    if (HasFatalFailure()) return;

    // OpenMetrics on stdout.
    const Result om = cli_as_root({"metrics"});
    ASSERT_EQ(om.status, 0) << om.transcript;
    const std::string& text = om.out;
    ASSERT_GE(text.size(), 6u) << om.transcript;
    EXPECT_EQ(text.substr(text.size() - 6), "# EOF\n") << text;
    EXPECT_NE(text.find("ptyvisor_starts_total{result=\"started\"} 2\n"), std::string::npos) << text;
    EXPECT_NE(text.find("ptyvisor_sessions_ended_total{reason=\"exited\"} 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("ptyvisor_sessions{profile=\"\",state=\"running\"} 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("ptyvisor_sessions{profile=\"\",state=\"ended\"} 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("ptyvisor_session_output_bytes_total{id=\"" + running_ + "\",profile=\"\",state=\"running\"} "),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("ptyvisor_build_info{version=\""), std::string::npos) << text;

    const std::string om_path = write_file("metrics.om", text);
    const Ran parsed = shell(
        "/usr/bin/python3 -c 'import sys\n"
        "from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse\n"
        "for f in parse(sys.stdin.read()): print(f.name, f.type)' < " + om_path);
    EXPECT_EQ(parsed.status, 0) << parsed.output;
    EXPECT_NE(parsed.output.find("ptyvisor_starts counter\n"), std::string::npos) << parsed.output;

    // What promtool says of OpenMetrics: it parses (exit 3 is lint problems; 1 would be a
    // parse error), and its only complaint is the counters' samples without help.
    const Ran promtool_om = shell("promtool check metrics < " + om_path);
    EXPECT_EQ(promtool_om.status, 3) << promtool_om.output;
    std::istringstream lines(promtool_om.output);
    for (std::string line; std::getline(lines, line);)
        EXPECT_NE(line.find("_total no help text"), std::string::npos) << line;

    // The Prometheus text format in a file for node_exporter: promtool has nothing to say.
    const std::string prom_path = *dir_ / "ptyvisor.prom";
    const Result written = cli_as_root({"metrics", "--textfile", prom_path});
    ASSERT_EQ(written.status, 0) << written.transcript;
    EXPECT_EQ(written.out, "");
    struct stat st{};
    ASSERT_EQ(::stat(prom_path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0644u);
    const Ran promtool_prom = shell("promtool check metrics < " + prom_path);
    EXPECT_EQ(promtool_prom.status, 0) << promtool_prom.output;
    EXPECT_EQ(promtool_prom.output, "");
}

// STATUS is root's: the agent's account gets the daemon's refusal, and no metrics.
TEST_F(Metrics, TheAgentGetsNoMetrics) {
    ASSERT_TRUE(start_daemon());
    const Result r = cli({"metrics"});
    EXPECT_EQ(r.status, 255) << r.transcript;
    EXPECT_EQ(r.out, "") << r.transcript;
}

}  // namespace
}  // namespace ptyvisor::itest
